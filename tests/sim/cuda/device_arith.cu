// nvcc's host build of the shared per-element arithmetic (device_arith.hpp).
#include "device_arith.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/scalar_convert.hpp"

#if !defined(__CUDACC__)
#error "device_arith.cu must be compiled by nvcc: the tests check nvcc's build of the shared code"
#endif

namespace rpsim::device_arith {

const char* compiled_by() {
  // The shared code's inline namespace under this compiler (host_device.hpp):
  // this line compiles only where it is nvcc's.
  static_assert(sizeof(&hd::nvcc::clz64) > 0);
  return "nvcc";
}

std::uint64_t round_binary64(const FormatDesc& fmt, double x, const RoundingDesc& r, Flags& flags) {
  return hd::round_binary64(fmt, x, r, flags);
}
std::uint64_t round_binary32(const FormatDesc& fmt, float x, const RoundingDesc& r, Flags& flags) {
  return hd::round_binary32(fmt, x, r, flags);
}
std::uint64_t widen_to_binary64(const FormatDesc& fmt, std::uint64_t bits) {
  return hd::widen_to_binary64(fmt, bits);
}
std::uint64_t add_signed(const FormatDesc& fmt, std::uint64_t a, std::uint64_t b, bool negate_b,
                         const RoundingDesc& r, Flags& flags) {
  return hd::add_signed(fmt, a, b, negate_b, r, flags);
}
std::uint64_t counter_random(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return hd::counter_random(seed, stream, index);
}

double tc_step(const sim::TcStep& p, int n, const double* av, const int* ae, const double* bv, const int* be,
               double c) {
  return sim::tc_detail::run_step<true>(p, n, av, ae, bv, be, c);
}
double tc_chain(const sim::TcStep& p, const double* a, const double* b, int k, double c) {
  return sim::tc_detail::chain<64>(p, a, 1, b, 1, k, c);
}
double tc_block_scaled_chain(const sim::TcStep& p, const double* a, const double* b, int k, double c,
                             const double* sa, const double* sb) {
  return sim::tc_detail::block_scaled_chain<64>(p, a, 1, b, 1, k, c, sa, 1, sb, 1);
}
double tc_plan_steps(const sim::TcStep& p, const sim::tc_detail::PlanView& plan, int s0, int s1,
                     const double* a, const double* b, double acc) {
  return sim::tc_detail::plan_steps<64>(p, plan, s0, s1, a, 1, b, 1, acc);
}

double sequential(const sim::AccumulatorOps& ops, const double* a, const double* b, std::size_t k, double c) {
  return sim::acc_detail::sequential(ops, a, 1, b, 1, k, c);
}
double fold_result(const sim::FoldDesc& f, double* partials, int n, double c, double sa, double sb) {
  return sim::fold_detail::fold_result(f, partials, n, c, sa, sb);
}
double fold_add(const FormatDesc& f, RoundingMode mode, double a, double b) {
  return sim::fold_detail::add(f, mode, a, b);
}

}  // namespace rpsim::device_arith
