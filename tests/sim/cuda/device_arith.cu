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

// The recipes' scale rules: nvcc's copies (host_device.hpp's inline namespace
// nvcc inside rpsim::recipe).
std::uint8_t e8m0_from_f32(float v, recipe::E8m0Cast cast) {
  return recipe::nvcc::e8m0_from_f32(v, cast);
}
std::uint8_t mx_scale_code(float amax, recipe::MxScaleRule rule, recipe::ElementKind k) {
  return recipe::nvcc::mx_scale_code(amax, rule, recipe::nvcc::element_info(k));
}
std::uint8_t mx_element(float x, std::uint8_t scale_code, recipe::MxScaleRule rule, recipe::ElementKind k) {
  return recipe::nvcc::mx_element(x, scale_code, rule, k);
}
recipe::Nvfp4TensorScale nvfp4_tensor_scale(float amax, float e4m3_max) {
  return recipe::nvcc::nvfp4_tensor_scale(amax, e4m3_max);
}
float nvfp4_scale_argument(float vec_max, float ges, recipe::Nvfp4Formula f) {
  return recipe::nvcc::nvfp4_scale_argument(vec_max, ges, f);
}
float nvfp4_encode_scale(float scale, float gds) {
  return recipe::nvcc::nvfp4_encode_scale(scale, gds);
}
std::uint8_t nvfp4_element(float x, float enc) {
  return recipe::nvcc::nvfp4_element(x, enc);
}
std::uint8_t nvfp4_4over6_scale(float vec_max, float ges, bool map4) {
  return recipe::nvcc::nvfp4_4over6_scale(vec_max, ges, map4);
}
float nvfp4_4over6_term(float q, std::uint8_t scale_code, float amax, float e4m3_max, float x, float ges,
                        bool fast, bool mse) {
  return recipe::nvcc::nvfp4_4over6_term(q, scale_code, amax, e4m3_max, x, ges, fast, mse);
}
recipe::Fp8Scale te_fp8_scale(float amax, float max, bool pow2) {
  return recipe::nvcc::te_fp8_scale(amax, max, pow2);
}
std::uint8_t fp8_element(float x, float scale, recipe::ElementKind k, bool clamp) {
  return recipe::nvcc::fp8_element(x, scale, k, clamp);
}
float element_value(recipe::ElementKind k, std::uint8_t code) {
  return recipe::nvcc::element_value(k, code);
}

namespace {
// The callbacks as __host__ __device__ function objects (a host lambda may
// not be called from the shared code's __host__ __device__ template).
struct RowMajor {
  const float* x;
  std::size_t cols;
  RPSIM_HD float operator()(std::size_t r, std::size_t c) const { return x[r * cols + c]; }
};
struct Store {
  std::uint8_t* codes;
  recipe::BlockScale* scales;
  std::size_t cols;
  RPSIM_HD void operator()(std::size_t r, std::size_t c, std::uint8_t code,
                           const recipe::BlockScale& b) const {
    codes[r * cols + c] = code;
    scales[r * cols + c] = b;
  }
};
}  // namespace

void quantize_operand(const QuantSpec& spec, const recipe::OperandGroups& g,
                      const recipe::Nvfp4TensorScale& ts, const recipe::StochasticElements* sr,
                      const float* x, std::uint8_t* codes, recipe::BlockScale* scales) {
  for (std::size_t gi = 0; gi < recipe::nvcc::group_rows(g); ++gi)
    for (std::size_t gj = 0; gj < recipe::nvcc::group_cols(g); ++gj)
      for (std::size_t j = 0; j < recipe::nvcc::group_blocks(g); ++j)
        recipe::nvcc::quantize_group_block(spec, g, gi, gj, j, ts, sr, RowMajor{x, g.cols},
                                           Store{codes, scales, g.cols});
}

}  // namespace rpsim::device_arith
