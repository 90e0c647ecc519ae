// Block-scaled quantisation recipes as the reference implementations run
// them: NVFP4 (Transformer Engine's reference_nvfp4.py), MX (torchao's to_mx
// and the OCP MX v1.0 spec, MXINT8 included), FP8 block scaling (TE's
// Float8BlockScaling reference, DeepSeek-V3's 1x128 / 128x128 tiles) and
// TE's FP8 per-tensor current scaling. One mechanism (quantize: the tensor,
// its tiles, each tile's amax, scale and elements) with the recipes as data
// (QuantSpec); the per-element arithmetic is recipe_arith*.hpp, shared with
// the CUDA backend. Each named recipe is one row of recipes(), named after
// the code it reproduces, with its options, their values and defaults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/formats/recipe_arith_scales.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

// How the elements are rounded: as the recipe says (nearest even, TE's
// ladder), or stochastically, as NVIDIA's NVFP4 recipe rounds gradients
// (arXiv 2509.25149: unbiased gradient estimates). The draw for element i
// (row-major in the quantised tensor) is counter_random(seed, stream, i): the
// same key gives the same bits on every machine and thread count. The scales
// are never rounded stochastically.
struct ElementRounding {
  RoundingMode mode = RoundingMode::nearest_even;  // nearest_even or stochastic
  std::uint64_t seed = 0, stream = 0;
};

// Where a block's scale comes from: an E8M0 power of two (MX), an E4M3 scale
// under a per-tensor binary32 scale (NVFP4), a binary32 scale (FP8 block and
// per-tensor scaling).
enum class ScaleFamily : std::uint8_t { mx, nvfp4, fp8 };
// 4over6 (TE nvfp4_use_4over6): each NVFP4 block tries map-to-6 and map-to-4
// scales and keeps the one with the smaller error (mean absolute or squared).
enum class FourOverSix : std::uint8_t { off, mae, mse };

// A recipe as data: plain values, so the CUDA backend can take it as it is.
struct QuantSpec {
  ScaleFamily family = ScaleFamily::mx;
  recipe::ElementKind element = recipe::ElementKind::e4m3;
  // The tile sharing one scale, rows x columns of the quantised tensor; 0
  // spans the whole dimension (per-tensor scaling: 0 x 0).
  int tile_rows = 1, tile_cols = 32;
  recipe::MxScaleRule scale_rule = recipe::MxScaleRule::floor;      // mx
  recipe::Nvfp4Formula formula = recipe::Nvfp4Formula::te_2026_03;  // nvfp4
  bool columnwise = false;                                          // quantise x^T (TE's columnwise usage)
  bool rht = false;         // x^T's rows times TE's 16-point random Hadamard transform first
  bool row_scaled = false;  // one per-tensor scale per row (TE row_scaled_nvfp4)
  FourOverSix four_over_six = FourOverSix::off;
  bool fast_math = false;    // 4over6's error on the kernel's FP16 products
  int e4m3_max = 448;        // the E4M3 maximum NVFP4's global scale assumes (4over6: 448 or 256)
  bool pow2_scales = false;  // fp8: scales rounded down to powers of two
  bool clamp = true;         // fp8: clamp to +-max before the cast (TE's block reference; per-tensor: no)
};

struct Quantized {
  QuantSpec spec;
  std::size_t rows = 0, cols = 0;              // the quantised tensor (x^T when columnwise)
  std::vector<std::uint8_t> codes;             // element codes, row-major (FP4/FP6: unpacked, low bits)
  std::size_t scale_rows = 0, scale_cols = 0;  // the grid of tiles, one scale each
  std::vector<std::uint8_t> scale_codes;       // MX: E8M0; NVFP4: E4M3; FP8: none
  std::vector<float> scales;         // each tile's decode multiplier (MX 2^k, NVFP4 E4M3, FP8 scale_inv)
  std::vector<float> amax;           // NVFP4: the tensor's amax, or one per row when row-scaled
  std::vector<float> tensor_encode;  // NVFP4: the global encode scale ges of each amax
};

// Quantises x (rows x cols, row-major binary32) under `spec`. `rounding`,
// when given and stochastic, rounds the elements stochastically (not MXINT8,
// not 4over6). `amax`, when given, is NVFP4's per-tensor amax in place of
// x's own (one value, or one per row when row-scaled): a tensor quantised in
// parts, each part under the whole tensor's scale. Throws
// std::invalid_argument for a shape the recipe cannot take (RHT on rows
// whose length is no multiple of 16) or a spec out of range.
// An element kind's name, as the format table and the recipe options spell
// it: e4m3 e5m2 e3m2 e2m3 e2m1 int8.
std::string_view element_name(recipe::ElementKind k);

Quantized quantize(const QuantSpec& spec, std::span<const float> x, std::size_t rows, std::size_t cols,
                   const ElementRounding* rounding = nullptr, std::span<const float> amax = {});

// Each element's value times its tile's scale (and, for NVFP4, TE's tensor
// decode: fp32(fp32(fp32(q * s) * amax) / fp32(6 E)), how TE's reference
// decodes in its 4over6 error and its GEMM's alpha), row-major as codes.
std::vector<double> dequantize(const Quantized& q);

// What a recipe does to a tensor's entries (the what-if counts of TE's
// LogFp8TensorStats): of the finite entries of x (the tensor `q` quantised,
// not columnwise), the non-zero ones that decode to zero (underflow), those
// beyond the largest value their block can hold (saturated: the element is
// the format's largest and decodes below |x|), and the non-zero ones whose
// element is a subnormal of the element format.
struct RecipeEffect {
  std::size_t entries = 0, nonzero = 0, nonfinite = 0, underflow = 0, saturated = 0, subnormal = 0;
};
RecipeEffect recipe_effect(const Quantized& q, std::span<const float> x);

// TE's fixed sign vector of the weight-gradient Hadamard transform
// (reference_nvfp4.py get_wgrad_sign_vector): +1 or -1 for each of 16.
std::span<const int> te_wgrad_sign_vector();

// x's rows (length a multiple of 16) times H / 4, H = diag(signs) Sylvester
// H16, each output a binary32 sum in index order (exact for TE's test data).
std::vector<float> te_hadamard_rows(std::span<const float> x, std::size_t rows, std::size_t cols,
                                    std::span<const int> signs);

// ---- the named recipes

struct RecipeOptionInfo {
  std::string_view name;
  std::string_view values;  // "a|b|c", or "integer"
  std::string_view default_value;
  std::string_view help;
};

struct RecipeInfo {
  std::string_view name;
  std::string_view reference;  // repository, commit, file and entry point
  std::string_view description;
  std::span<const RecipeOptionInfo> options;
};

// The rows: te-nvfp4, torchao-mx, ocp-mx, te-fp8-block, te-fp8-current.
std::span<const RecipeInfo> recipes();

// Option name -> value as text ("true", "16x16", "te-2026-02").
using RecipeOptions = std::map<std::string, std::string>;

// The spec of a named recipe with `options` over its defaults. Throws
// std::invalid_argument naming the unknown recipe or option (with the known
// names) or the value and the values allowed, or a combination the
// reference refuses.
QuantSpec recipe_spec(std::string_view recipe, const RecipeOptions& options = {});

}  // namespace rpsim
