// Accumulation models for dot products and GEMM, chosen at run time.
//
// A model is a value: build one directly, or from a spec string / JSON:
//   sequential[:FMT[:RND]]  recursive summation, products rounded to FMT, then
//                            each addition rounded (default fp32, rne)
//   fma[:FMT[:RND]]          recursive summation with fused multiply-add
//   pairwise[:FMT[:RND]]     pairwise (tree) summation of the rounded products
//   blocked:B[:FMT[:RND]]    blocked summation, block size B (Blanchard,
//                            Higham & Mary, SISC 2020): recursive summation of
//                            the rounded products inside each block, the
//                            block sums added recursively
//   kahan[:FMT[:RND]]        compensated (Kahan) summation of rounded products
//   exact[:FMT[:RND]]        no rounding until one final rounding to FMT
//                            (default binary64); the ground truth
//   tc:PRESET[:IN[:OUT[:INSTR]]][:FIELD=VALUE...]  Tensor Core block-FMA model
//                            (tensor_core.hpp), defaults IN=fp16, OUT=fp32;
//                            held as the one-chain KernelSchedule
//                            (KernelSchedule::of_instruction), which is what a
//                            GEMM over the bare instruction computes;
//                            INSTR mma.sync|wgmma|tcgen05.mma|mfma|mfma.1k;
//                            input_b=FMT (B's format: e4m3 x e5m2),
//                            scale=ue8m0|ue4m3 and scale_block=16|32 (default
//                            32 / 16) pick the row (block-scaled: gemm.hpp
//                            GemmScales); FIELD overrides one field of
//                            the preset: terms_per_step fraction_bits
//                            result_fraction_bits final_rounding
//                            subnormal_inputs subnormal_outputs
//                            alignment_exponent_floor c_join (with_products |
//                            after_products) terms_per_instruction step_interleave
//   kernel:GPU:IN:OUT[:INSTR][:FIELD=VALUE...]  a GEMM kernel's schedule over
//                            the Tensor Core instruction tc:GPU:IN:fp32[:INSTR]
//                            (kernel_schedule.hpp): FIELD is accumulator=FMT
//                            (the instruction's output), a schedule field
//                            (stored input_rounding split_k split_tile
//                            promotion promotion_rounding k_order reduction
//                            reduction_format reduction_rounding c_placement
//                            scale_epilogue output_rounding) or a Tensor Core
//                            field
//   cublas:h100:IN:OUT[:rpr=0|1]  a named kernel preset (kernel_presets()):
//                            the schedule cuBLAS picks for the GEMM's shape
//   eigen[:binary64[:rne]]   not a summation model: Eigen's own binary64
//                            product, in whatever order Eigen picks (GEMM:
//                            cache-blocked panels chosen from the shapes and
//                            the host's cache sizes, vector lanes, FMA when
//                            the build targets it; dot: its vectorised
//                            reduction). Deterministic for one build and host
//                            and for any thread count, but GEMM and dot need
//                            not agree in the last bit. The training
//                            simulator's FP64 shadow uses it for speed.
// RND is rne rna rtz rd ru rodd sr. A trailing `:seed=N` sets the stochastic
// rounding seed (sr draws counter_random(seed, stream, element index)).
// JSON: {"kind":"sequential","format":"bf16","rounding":"sr","seed":7} or
// {"kind":"tc","preset":"h100","input":"fp16","output":"fp32"} (optional TC
// overrides: the same FIELD names; unknown keys are an error),
// {"kind":"kernel","gpu":"h100","input":"tf32","output":"fp32","split_k":8} or
// {"kind":"cublas","gpu":"h100","input":"fp16","output":"fp16","rpr":1}. spec() writes
// the fields that differ from the preset, so parse(spec()) is the same model.
// The kinds are the rows of accumulation_kinds() (accumulation_kinds.hpp).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

// A spec string or JSON that names no valid model; the message starts
// "accumulation model 'SPEC': " and names the offending token. A type of its
// own so that a parser that wraps a nested error can tell one already
// wrapped.
class AccumulationSpecError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Format + rounding of every addition (and of products unless fused).
struct AccumulatorSpec {
  Format format = formats::binary32();
  RoundingMode rounding = RoundingMode::nearest_even;
  std::uint64_t seed = 0;  // stochastic rounding only
};

struct Sequential {
  AccumulatorSpec acc;
  bool fused = false;  // true: s = fma(a_i, b_i, s), one rounding per step
};
struct Pairwise {
  AccumulatorSpec acc;
};
struct Blocked {
  int block = 32;
  AccumulatorSpec acc;
};
struct Kahan {
  AccumulatorSpec acc;
};
struct Exact {
  Format output = formats::binary64();
  RoundingMode rounding = RoundingMode::nearest_even;
};
// Eigen's binary64 product (spec "eigen:binary64"); see above.
struct EigenGemm {};

class AccumulationModel {
 public:
  // A bare Tensor Core instruction is a KernelSchedule (of_instruction): GEMM,
  // dot and every visitor handle it as the schedule it is.
  using Variant =
      std::variant<Sequential, Pairwise, Blocked, Kahan, Exact, KernelSchedule, KernelPreset, EigenGemm>;

  AccumulationModel() : model_(Sequential{}) {}
  AccumulationModel(Variant model) : model_(std::move(model)) {}  // NOLINT: implicit on purpose
  // The bare instruction: its one-chain schedule.
  AccumulationModel(const TensorCoreModel& m);  // NOLINT: implicit on purpose

  // Throw AccumulationSpecError (a std::invalid_argument) naming the
  // offending token.
  static AccumulationModel parse(std::string_view spec);
  static AccumulationModel from_json(const nlohmann::json& j);

  const Variant& variant() const { return model_; }
  // The Tensor Core instruction when the model is a bare one (tc:...), else
  // nullptr.
  const TensorCoreModel* bare_instruction() const;
  // The run plan's extra seconds per emulated multiply-add (the kind's row).
  double plan_seconds_per_multiply_add() const;
  // The canonical spec string (parse(spec()) gives the same model).
  std::string spec() const;
  // The format results are in (accumulator, exact output, TC output, or
  // binary64 for eigen).
  const Format& output_format() const;
  // The format the model reads: a tensor core its input format, a kernel
  // schedule its stored format (binary32 for tf32), every other model values
  // of its accumulator format.
  const Format& input_format() const;
  // The rounding of the model's additions (a tensor core's final
  // normalisation): it decides which unit roundoff error bounds use (2^-p for
  // round to nearest, 2^(1-p) otherwise).
  RoundingMode rounding() const;
  // The unit roundoff of output_format() under rounding().
  double unit_roundoff() const;

  // sum_i a_i*b_i + c, with inputs exact doubles (values of the input format;
  // c a value of the output format). `stream` keys stochastic rounding (use
  // the output element's index) so results do not depend on thread order.
  double dot(std::span<const double> a, std::span<const double> b, double c = 0.0,
             std::uint64_t stream = 0) const;
  // Strided variant used by GEMM (b_stride between consecutive b elements).
  double dot_strided(const double* a, std::ptrdiff_t a_stride, const double* b, std::ptrdiff_t b_stride,
                     std::size_t k, double c, std::uint64_t stream) const;

 private:
  Variant model_;
};

}  // namespace rpsim::sim
