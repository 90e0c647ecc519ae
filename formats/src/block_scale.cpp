// OCP MX and NVFP4 block quantisation of binary64 arrays (block_scale.hpp):
// the recipe mechanism (recipe.hpp) on the values read as binary32.
#include "rpsim/formats/block_scale.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "rpsim/formats/recipe.hpp"

namespace rpsim {

namespace {

using recipe::ElementKind;

ElementKind mx_element_kind(const Format& f) {
  const char* names[] = {"e4m3", "e5m2", "e3m2", "e2m3", "e2m1"};
  for (int i = 0; i < 5; ++i)
    if (f == parse_format(names[i])) return static_cast<ElementKind>(i);
  throw std::invalid_argument(fmt::format(
      "mx_quantize: element format '{}' is not an OCP MX element format (e4m3 e5m2 e3m2 e2m3 e2m1)", f.name));
}

std::vector<float> as_binary32(std::span<const double> values) {
  std::vector<float> x(values.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(values[i]);  // nearest even
  return x;
}

// The codes and scales of one row of blocks as values.
BlockQuantized block_values(const Quantized& q, std::size_t block) {
  BlockQuantized b;
  b.block = block;
  b.elements.resize(q.codes.size());
  for (std::size_t i = 0; i < q.codes.size(); ++i)
    b.elements[i] = recipe::element_value(q.spec.element, q.codes[i]);
  b.scales.assign(q.scales.begin(), q.scales.end());
  b.scale_codes = q.scale_codes;
  return b;
}

}  // namespace

BlockQuantized mx_quantize(const Format& element, std::span<const double> values, std::size_t block,
                           const ElementRounding& rounding) {
  const ElementKind kind = mx_element_kind(element);
  if (block == 0) throw std::invalid_argument("mx_quantize: block size must be at least 1");
  QuantSpec spec = recipe_spec("ocp-mx", {{"block", std::to_string(block)}});
  spec.element = kind;
  const std::vector<float> x = as_binary32(values);
  return block_values(quantize(spec, x, 1, x.size(), &rounding), block);
}

BlockQuantized nvfp4_quantize(std::span<const double> values, std::size_t block, double tensor_amax,
                              const ElementRounding& rounding) {
  if (block == 0) throw std::invalid_argument("nvfp4_quantize: block size must be at least 1");
  QuantSpec spec = recipe_spec("te-nvfp4");
  spec.tile_cols = static_cast<int>(block);  // TE's 16, or a whole 16x16 tile read as one line
  const std::vector<float> x = as_binary32(values);
  const float amax = static_cast<float>(tensor_amax);
  const Quantized q = quantize(spec, x, 1, x.size(), &rounding,
                               tensor_amax < 0 ? std::span<const float>() : std::span<const float>(&amax, 1));
  BlockQuantized b = block_values(q, block);
  // x ~ element * scale / ges: the epilogue divides by ges.
  b.tensor_scale = 1.0 / static_cast<double>(q.tensor_encode.at(0));
  return b;
}

std::vector<double> dequantize(const BlockQuantized& q) {
  std::vector<double> out(q.elements.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = q.elements[i] * q.scales[i / q.block] * q.tensor_scale;
  return out;
}

}  // namespace rpsim
