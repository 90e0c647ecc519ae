// The array rounding kernel built for avx2, chosen at run time by
// array_round.cpp when the CPU supports it. AVX2: 4 binary64 lanes with variable shifts (vpsrlvq); no 64-bit
// multiply, so the stochastic RNG is emulated. The target attribute sits on the wrapper only: round_block is
// inlined into it, and nothing else in this file is compiled for avx2.
#include "array_dispatch.hpp"

namespace rpsim::array_detail {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

struct Avx2 {
  template <class Fixed, int Kind, class In, class Out>
  __attribute__((target("avx2,bmi2,fma"))) static void run(const KernelParams& kp, const In* in, Out* out,
                                                           std::size_t n, std::uint64_t index0) {
    kernel_block<Fixed, Kind, In, Out>(kp, in, out, n, index0);
  }
};

}  // namespace

template <class In, class Out>
KernelFn<In, Out> pick_avx2(const KernelParams& kp) {
  return pick_specialised<Avx2, In, Out>(kp);
}
#else
template <class In, class Out>
KernelFn<In, Out> pick_avx2(const KernelParams&) {
  return nullptr;
}
#endif

#define RPSIM_INSTANTIATE(In, Out) template KernelFn<In, Out> pick_avx2<In, Out>(const KernelParams&);
RPSIM_ARRAY_FOR_EACH_PAIR(RPSIM_INSTANTIATE)
#undef RPSIM_INSTANTIATE

}  // namespace rpsim::array_detail
