// What a recipe does to a tensor's entries (recipe.hpp recipe_effect).
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "rpsim/formats/recipe.hpp"

namespace rpsim {

namespace {

// An element code's magnitude is the format's largest / a subnormal.
bool largest(recipe::ElementKind k, std::uint8_t code) {
  using recipe::ElementKind;
  switch (k) {
    case ElementKind::e4m3: return (code & 0x7f) == 0x7e;
    case ElementKind::e5m2: return (code & 0x7f) == 0x7b;
    case ElementKind::e3m2:
    case ElementKind::e2m3: return (code & 0x1f) == 0x1f;
    case ElementKind::e2m1: return (code & 0x7) == 0x7;
    case ElementKind::int8: break;
  }
  return code == 127 || code == 0x81;
}

bool subnormal(recipe::ElementKind k, std::uint8_t code) {
  using recipe::ElementKind;
  const int mbits = recipe::element_info(k).mbits;
  int ebits = 0;
  switch (k) {
    case ElementKind::e4m3: ebits = 4; break;
    case ElementKind::e5m2: ebits = 5; break;
    case ElementKind::e3m2: ebits = 3; break;
    case ElementKind::e2m3:
    case ElementKind::e2m1: ebits = 2; break;
    case ElementKind::int8: return false;  // fixed point: no subnormals
  }
  const unsigned mag = code & ((1u << (ebits + mbits)) - 1u);
  return mag != 0 && (mag >> mbits) == 0;
}

}  // namespace

RecipeEffect recipe_effect(const Quantized& q, std::span<const float> x) {
  if (q.spec.columnwise)
    throw std::invalid_argument("recipe_effect: a columnwise quantisation (x^T) is not x's");
  if (x.size() != q.codes.size())
    throw std::invalid_argument(
        fmt::format("recipe_effect: {} values for {} codes", x.size(), q.codes.size()));
  const std::vector<double> d = dequantize(q);
  RecipeEffect e;
  e.entries = x.size();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      ++e.nonfinite;
      continue;
    }
    if (x[i] == 0) continue;
    ++e.nonzero;
    e.underflow += d[i] == 0;
    e.saturated +=
        d[i] != 0 && largest(q.spec.element, q.codes[i]) && std::fabs(double(x[i])) > std::fabs(d[i]);
    e.subnormal += subnormal(q.spec.element, q.codes[i]);
  }
  return e;
}

}  // namespace rpsim
