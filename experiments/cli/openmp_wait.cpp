// OpenMP threads that sleep instead of spinning, for the rpsim binary.
//
// libgomp's threads busy-wait for the next parallel region and at its
// barriers (OMP_WAIT_POLICY unset: GOMP_SPINCOUNT 300000, "about 3 ms" in
// libgomp's env.c). On a machine whose cores other processes also use, a
// spinning thread is a CPU hog to the scheduler, so the thread a region waits
// for runs only when the scheduler hands its core back: `rpsim train
// experiments/configs/deepspeed-fp16.json` (an MLP at batch 8, about a hundred
// regions a step) ran 2-3 steps/s with the default 2 threads beside other
// work, against 16.5 with --threads 1 (issue #36). With OMP_WAIT_POLICY=
// PASSIVE a waiting thread sleeps in the kernel, which wakes it at once.
//
// libgomp reads the variable once, in its constructor, before main(). Setting
// it earlier still, from the executable's .preinit_array (which the loader
// runs before any library's constructor), does not work either: libc's own
// initialiser, which runs after it, sets `environ` back to the array the
// kernel passed (glibc's __libc_init_first), and libgomp reads that. So when
// the user has set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT, the program
// executes itself again (/proc/self/exe, same arguments) with
// OMP_WAIT_POLICY=PASSIVE added, before any constructor of this program or
// its libraries has run: about a millisecond. main() then removes the
// variable again (restore_openmp_environment), so that programs rpsim starts
// see the environment they were given. Without /proc (execve fails) rpsim
// runs on with libgomp's default.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "commands.hpp"

namespace {

constexpr const char* kPolicy = "OMP_WAIT_POLICY=PASSIVE";
// Says that kPolicy was added here, not by the user.
constexpr const char* kMarker = "RPSIM_OMP_WAIT_POLICY_ADDED=1";

bool has(char** env, const char* name) {
  const std::size_t n = std::strlen(name);
  for (char** e = env; *e; ++e)
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return true;
  return false;
}

void passive_openmp_wait(int, char** argv, char** env) {
  if (!env || has(env, "OMP_WAIT_POLICY") || has(env, "GOMP_SPINCOUNT") ||
      has(env, "RPSIM_OMP_WAIT_POLICY_ADDED"))
    return;
  std::size_t n = 0;
  while (env[n]) ++n;
  auto** added = static_cast<char**>(std::malloc((n + 3) * sizeof(char*)));
  if (!added) return;
  std::memcpy(added, env, n * sizeof(char*));
  added[n] = const_cast<char*>(kPolicy);
  added[n + 1] = const_cast<char*>(kMarker);
  added[n + 2] = nullptr;
  ::execve("/proc/self/exe", argv, added);
  std::free(added);  // execve failed: run on as we are
}

}  // namespace

// Only an executable may have .preinit_array entries (the linker refuses them in a shared object).
using Preinit = void (*)(int, char**, char**);
[[gnu::section(".preinit_array"), gnu::used]] const Preinit rpsim_preinit_openmp_wait = passive_openmp_wait;

namespace rpsim::cli {

void restore_openmp_environment() {
  if (!std::getenv("RPSIM_OMP_WAIT_POLICY_ADDED")) return;
  ::unsetenv("RPSIM_OMP_WAIT_POLICY_ADDED");
  ::unsetenv("OMP_WAIT_POLICY");
}

}  // namespace rpsim::cli
