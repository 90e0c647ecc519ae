// _time_round_values: the C++ array path (round_values) timed in C++ on the
// buffer Python hands over, so that experiments/bench/bench_python_round.py can
// compare rpsim.round with the same work done without Python in between.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>

#include "bindings.hpp"
#include "rpsim/formats/array.hpp"

namespace rpsim::python {

namespace {

constexpr std::size_t kHuge = std::size_t(2) << 20;

double now(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// The fastest of `repeats` calls of round_values(fmt, x, out), in seconds of
// wall time or of this thread's CPU time (single-threaded runs on a shared
// machine: time the thread did not run is not counted). fresh_output: into a
// new uninitialised buffer each time (allocated, written, freed inside the
// timing), the work rpsim.round(x) without out= does: 80 MB of new memory
// costs its page faults and the kernel's zeroing, whoever allocates it.
double time_round_values(py::array_t<double, py::array::c_style> x,
                         py::array_t<double, py::array::c_style> out, const std::string& spec,
                         const std::string& rounding, int threads, int repeats, bool thread_cpu_time,
                         bool fresh_output) {
  if (x.size() != out.size()) throw py::value_error("x and out differ in size");
  if (repeats < 1) throw py::value_error("repeats must be >= 1");
  const Format& fmt = format_arg(spec);
  ArrayOptions o;
  o.rounding.mode = parse_rounding(rounding);
  o.threads = threads;
  const std::span<const double> in(x.data(), std::size_t(x.size()));
  const std::span<double> dst(out.mutable_data(), std::size_t(out.size()));
  const clockid_t clock = thread_cpu_time ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  py::gil_scoped_release release;
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = now(clock);
    if (fresh_output) {
      // As NumPy allocates a large array: madvise(MADV_HUGEPAGE) on it
      // (numpy/core/src/multiarray/alloc.c), 2 MiB pages where the kernel has them.
      const std::size_t bytes = (in.size() * sizeof(double) + kHuge - 1) / kHuge * kHuge;
      std::unique_ptr<double, decltype(&std::free)> buffer(
          static_cast<double*>(std::aligned_alloc(kHuge, bytes)), &std::free);
      if (!buffer) throw std::bad_alloc();
      madvise(buffer.get(), bytes, MADV_HUGEPAGE);
      round_values(fmt, in, std::span<double>(buffer.get(), in.size()), o);
    } else {
      round_values(fmt, in, dst, o);
    }
    best = std::min(best, now(clock) - t0);
  }
  return best;
}

}  // namespace

void bind_bench(py::module_& m) {
  using py::arg;
  m.def("_time_round_values", &time_round_values, arg("x"), arg("out"), arg("format"),
        arg("rounding") = "rne", arg("threads") = 1, arg("repeats") = 5, arg("thread_cpu_time") = false,
        arg("fresh_output") = false,
        "Seconds of the fastest of `repeats` C++ calls of round_values on x (float64) into out: the array "
        "path without Python, for experiments/bench/bench_python_round.py.");
}

}  // namespace rpsim::python
