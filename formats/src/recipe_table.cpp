// The named recipes (recipe.hpp recipes()): one row each, named after the
// code it reproduces, with its options; recipe_spec reads a row's options
// into the mechanism's QuantSpec.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "rpsim/formats/recipe.hpp"

namespace rpsim {

namespace {

using recipe::ElementKind;

// Option values as checked text, defaults filled in.
struct RowOptions {
  const RecipeOptions& given;
  std::string_view row;
  std::span<const RecipeOptionInfo> infos;
  std::string operator[](std::string_view name) const {
    const auto it = given.find(std::string(name));
    if (it != given.end()) return it->second;
    for (const auto& o : infos)
      if (o.name == name) return std::string(o.default_value);
    throw std::logic_error(fmt::format("recipe {}: no option {}", row, name));
  }
  bool flag(std::string_view name) const { return (*this)[name] == "true"; }
};

[[noreturn]] void refuse(std::string_view row, const std::string& why) {
  throw std::invalid_argument(fmt::format("recipe {}: {}", row, why));
}

// ElementKind's names, in its order.
constexpr std::array<const char*, 6> kElementNames{"e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"};

ElementKind element_kind(const std::string& name) {
  for (std::size_t i = 0; i < kElementNames.size(); ++i)
    if (name == kElementNames[i]) return static_cast<ElementKind>(i);
  throw std::logic_error("element " + name);
}

QuantSpec te_nvfp4(const RowOptions& o) {
  QuantSpec s;
  s.family = ScaleFamily::nvfp4;
  s.element = ElementKind::e2m1;
  s.formula =
      o["formula"] == "te-2026-02" ? recipe::Nvfp4Formula::te_2026_02 : recipe::Nvfp4Formula::te_2026_03;
  s.tile_rows = o["tile"] == "16x16" ? 16 : 1;
  s.tile_cols = 16;
  s.columnwise = o["direction"] == "columnwise";
  s.rht = o.flag("rht");
  s.row_scaled = o.flag("row_scaled");
  const std::string fos = o["four_over_six"];
  s.four_over_six = fos == "mae" ? FourOverSix::mae : fos == "mse" ? FourOverSix::mse : FourOverSix::off;
  s.fast_math = o.flag("fast_math");
  s.e4m3_max = std::stoi(o["e4m3_max"]);
  const bool old = s.formula == recipe::Nvfp4Formula::te_2026_02;
  if (old && (s.row_scaled || s.four_over_six != FourOverSix::off))
    refuse(o.row, "formula te-2026-02 (TE aad3512) has no row_scaled or four_over_six");
  if (s.rht && !s.columnwise) refuse(o.row, "rht applies to the columnwise direction only (as in TE)");
  if (s.row_scaled && (s.columnwise || s.tile_rows != 1))
    refuse(o.row, "row_scaled takes direction=rowwise and tile=1x16 (as in TE)");
  if (s.four_over_six == FourOverSix::off && (s.fast_math || s.e4m3_max != 448))
    refuse(o.row, "fast_math and e4m3_max=256 are options of four_over_six=mae|mse");
  return s;
}

QuantSpec mx(const RowOptions& o, bool ocp) {
  QuantSpec s;
  s.family = ScaleFamily::mx;
  s.element = element_kind(o["element"]);
  s.tile_rows = 1;
  const int block = std::stoi(o["block"]);
  if (block < 1) refuse(o.row, fmt::format("block {} (at least 1)", block));
  s.tile_cols = block;
  if (!ocp) {
    const std::string rule = o["scale_rule"];
    s.scale_rule = rule == "rceil"  ? recipe::MxScaleRule::rceil
                   : rule == "ceil" ? recipe::MxScaleRule::ceil
                   : rule == "even" ? recipe::MxScaleRule::even
                                    : recipe::MxScaleRule::floor;
  }
  return s;
}

QuantSpec te_fp8(const RowOptions& o, bool block) {
  QuantSpec s;
  s.family = ScaleFamily::fp8;
  s.element = element_kind(o["element"]);
  s.pow2_scales = o.flag("pow2");
  s.tile_rows = block && o["tile"] == "128x128" ? 128 : (block ? 1 : 0);
  s.tile_cols = block ? 128 : 0;
  s.clamp = block;  // the block reference clamps to +-max before the cast, the per-tensor one does not
  return s;
}

constexpr std::string_view kBool = "false|true";

constexpr RecipeOptionInfo kNvfp4Options[] = {
    {"formula", "te-2026-03|te-2026-02", "te-2026-03",
     "block decode scale: te-2026-03 fp32(vec_max * fp32(ges * fp32(1/6))) (TE since 523801d), te-2026-02 "
     "fp32(fp32(vec_max / 6) * ges) (TE aad3512)"},
    {"tile", "1x16|16x16", "1x16", "1x16 blocks along rows, or 16x16 tiles (weights)"},
    {"direction", "rowwise|columnwise", "rowwise", "columnwise: quantise x^T with its own amax"},
    {"rht", kBool, "false", "16-point Hadamard transform with TE's fixed sign vector (columnwise)"},
    {"row_scaled", kBool, "false", "one per-tensor scale per row (TE row_scaled_nvfp4)"},
    {"four_over_six", "off|mae|mse", "off", "4over6: map-to-4 or map-to-6 per block by the smaller error"},
    {"fast_math", kBool, "false", "4over6 error on the kernel's FP16 products (TE ..._err_use_fast_math)"},
    {"e4m3_max", "448|256", "448", "E4M3 maximum of the global scale under 4over6 (TE nvfp4_e4m3_max)"},
};
constexpr RecipeOptionInfo kTorchaoMxOptions[] = {
    {"element", "e4m3|e5m2|e3m2|e2m3|e2m1", "e4m3", "element format"},
    {"block", "integer", "32", "entries per block along the last axis"},
    {"scale_rule", "floor|rceil|ceil|even", "floor",
     "E8M0 scale: floor (OCP), rceil (cvt.rp of amax / max), ceil, even (amax rounded to the element's "
     "bits)"},
};
constexpr RecipeOptionInfo kOcpMxOptions[] = {
    {"element", "e4m3|e5m2|e3m2|e2m3|e2m1|int8", "e4m3", "element format (int8: MXINT8, 2^-6 fixed point)"},
    {"block", "integer", "32", "entries per block along the last axis"},
};
constexpr RecipeOptionInfo kFp8BlockOptions[] = {
    {"element", "e4m3|e5m2", "e4m3", "element format"},
    {"tile", "1x128|128x128", "1x128", "1x128 blocks (activations, gradients) or 128x128 tiles (weights)"},
    {"pow2", kBool, "false", "scales rounded down to powers of two (DeepSeek-V3)"},
};
constexpr RecipeOptionInfo kFp8TensorOptions[] = {
    {"element", "e4m3|e5m2", "e4m3", "element format"},
    {"pow2", kBool, "false", "scale rounded down to a power of two (force_pow_2_scales)"},
};

struct Row {
  RecipeInfo info;
  QuantSpec (*make)(const RowOptions&);
};

const Row kRows[] = {
    {{"te-nvfp4",
      "NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b "
      "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py NVFP4QuantizerRef(...).quantize(x); "
      "formula=te-2026-02: aad3512d2c0a5a297b89c78f37ad4f1344f67637 "
      "transformer_engine/pytorch/custom_recipes/quantization_ref_nvfp4.py",
      "NVFP4: E2M1 elements, E4M3 block decode scales under a binary32 per-tensor amax, as TE's reference",
      kNvfp4Options},
     te_nvfp4},
    {{"torchao-mx",
      "pytorch/ao 36027d82d1ad9949597ea16002ff4940374b1b94 torchao/prototype/mx_formats/mx_tensor.py "
      "to_mx(x, elem_dtype, block_size, scaling_mode) (eager PyTorch path)",
      "MX: E8M0 block scales under torchao's four scale rules", kTorchaoMxOptions},
     [](const RowOptions& o) { return mx(o, false); }},
    {{"ocp-mx", "OCP Microscaling Formats (MX) v1.0 specification, Sec. 5 and 6.3",
      "MX as the spec writes it: floor scale rule, saturating elements, MXINT8", kOcpMxOptions},
     [](const RowOptions& o) { return mx(o, true); }},
    {{"te-fp8-block",
      "NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b "
      "tests/pytorch/references/blockwise_quantizer_reference.py BlockwiseQuantizerReference().quantize "
      "(+ quantize_scale_calc.py)",
      "FP8 block scaling (Float8BlockScaling, DeepSeek-V3): binary32 scale per 1x128 block or 128x128 tile",
      kFp8BlockOptions},
     [](const RowOptions& o) { return te_fp8(o, true); }},
    {{"te-fp8-current",
      "NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b "
      "tests/pytorch/references/ref_per_tensor_cs.py "
      "ref_per_tensor_cs_cast",
      "FP8 per-tensor current scaling: one binary32 scale from the tensor's amax", kFp8TensorOptions},
     [](const RowOptions& o) { return te_fp8(o, false); }},
};

std::string names_of(auto&& range) {
  std::string s;
  for (const auto& x : range) {
    if (!s.empty()) s += ' ';
    s.append(x.data(), x.size());
  }
  return s;
}

void check_value(std::string_view row, const RecipeOptionInfo& o, const std::string& v) {
  if (o.values == "integer") {
    std::size_t used = 0;
    try {
      (void)std::stoi(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != v.size())
      refuse(row, fmt::format("option {}: '{}' is not an integer", o.name, v));
    return;
  }
  std::string_view rest = o.values;
  while (!rest.empty()) {
    const auto bar = rest.find('|');
    if (rest.substr(0, bar) == v) return;
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  refuse(row, fmt::format("option {}: '{}' is not one of {}", o.name, v, o.values));
}

}  // namespace

std::span<const RecipeInfo> recipes() {
  static const std::vector<RecipeInfo> infos = [] {
    std::vector<RecipeInfo> v;
    for (const auto& r : kRows) v.push_back(r.info);
    return v;
  }();
  return infos;
}

QuantSpec recipe_spec(std::string_view name, const RecipeOptions& options) {
  const auto row =
      std::find_if(std::begin(kRows), std::end(kRows), [&](const Row& r) { return r.info.name == name; });
  if (row == std::end(kRows)) {
    std::vector<std::string_view> names;
    for (const auto& r : kRows) names.push_back(r.info.name);
    throw std::invalid_argument(fmt::format("unknown recipe '{}' (known: {})", name, names_of(names)));
  }
  for (const auto& option : options) {
    // (Not a structured binding: clang before 16 cannot capture one in a lambda; the fuzz build is clang's.)
    const std::string& key = option.first;
    const std::string& value = option.second;
    const auto o = std::find_if(row->info.options.begin(), row->info.options.end(),
                                [&](const RecipeOptionInfo& i) { return i.name == key; });
    if (o == row->info.options.end()) {
      std::vector<std::string_view> names;
      for (const auto& i : row->info.options) names.push_back(i.name);
      refuse(name, fmt::format("unknown option '{}' (options: {})", key, names_of(names)));
    }
    check_value(name, *o, value);
  }
  return row->make(RowOptions{options, name, row->info.options});
}

std::string_view element_name(recipe::ElementKind k) {
  return kElementNames[static_cast<std::size_t>(k)];
}

}  // namespace rpsim
