// OCP MX and NVFP4 block quantisation (block_scale.hpp).
#include "rpsim/formats/block_scale.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "rpsim/formats/random.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

namespace {

// Element i in `f`, finite values beyond its largest clamped to it first
// (OCP MX v1.0 Sec. 6.3: saturation of normal numbers); nearest even, or
// stochastic with element i's draw (a clamped value never rounds past max).
double round_saturating(const Format& f, double v, const ElementRounding& rounding, std::size_t i) {
  const double max = f.max_finite();
  Rounding r;
  r.mode = rounding.mode;
  if (rounding.mode == RoundingMode::stochastic)
    r.random_bits = counter_random(rounding.seed, rounding.stream, i);
  Flags flags = 0;
  return to_double(f, round_double(f, std::clamp(v, -max, max), r, flags));
}

float fp32(double v) {
  return static_cast<float>(v);  // nearest even (IEEE conversion)
}

bool is_mx_element(const Format& f) {
  for (const char* n : {"e4m3", "e5m2", "e3m2", "e2m3", "e2m1"})
    if (f == parse_format(n)) return true;
  return false;
}

}  // namespace

BlockQuantized mx_quantize(const Format& element, std::span<const double> values, std::size_t block,
                           const ElementRounding& rounding) {
  if (!is_mx_element(element))
    throw std::invalid_argument(fmt::format(
        "mx_quantize: element format '{}' is not an OCP MX element format (e4m3 e5m2 e3m2 e2m3 e2m1)",
        element.name));
  if (block == 0) throw std::invalid_argument("mx_quantize: block size must be at least 1");
  const Format& e8m0 = parse_format("e8m0");
  BlockQuantized q;
  q.block = block;
  q.elements.resize(values.size());
  for (std::size_t b0 = 0; b0 < values.size(); b0 += block) {
    const std::size_t b1 = std::min(values.size(), b0 + block);
    double amax = 0;
    bool special = false;
    for (std::size_t i = b0; i < b1; ++i) {
      special |= !std::isfinite(values[i]);
      amax = std::max(amax, std::fabs(values[i]));
    }
    if (special) {
      q.scales.push_back(std::numeric_limits<double>::quiet_NaN());
      q.scale_codes.push_back(0xff);
      for (std::size_t i = b0; i < b1; ++i) q.elements[i] = 0;
      continue;
    }
    int shared = amax == 0 ? -127 : std::ilogb(amax) - element.emax;
    shared = std::clamp(shared, -127, 127);
    const double x = std::ldexp(1.0, shared);
    q.scales.push_back(x);
    q.scale_codes.push_back(static_cast<std::uint8_t>(round_double(e8m0, x, RoundingMode::nearest_even)));
    for (std::size_t i = b0; i < b1; ++i)
      q.elements[i] = round_saturating(element, values[i] / x, rounding, i);
  }
  return q;
}

BlockQuantized nvfp4_quantize(std::span<const double> values, std::size_t block, double tensor_amax,
                              const ElementRounding& rounding) {
  if (block == 0) throw std::invalid_argument("nvfp4_quantize: block size must be at least 1");
  const Format& e4m3 = formats::e4m3();
  const Format& e2m1 = parse_format("e2m1");
  double amax = tensor_amax;
  if (amax < 0) {
    amax = 0;
    for (double v : values) amax = std::max(amax, std::fabs(v));
  }
  const float s_enc = amax > 0 && std::isfinite(amax) ? fp32(6.0 * 448.0 / amax) : 1.0f;
  BlockQuantized q;
  q.block = block;
  q.tensor_scale = 1.0 / static_cast<double>(s_enc);
  q.elements.resize(values.size());
  for (std::size_t b0 = 0; b0 < values.size(); b0 += block) {
    const std::size_t b1 = std::min(values.size(), b0 + block);
    double bmax = 0;
    for (std::size_t i = b0; i < b1; ++i) bmax = std::max(bmax, std::fabs(values[i]));
    const float s_dec = fp32(fp32(bmax / 6.0) * s_enc);
    const auto code = static_cast<std::uint8_t>(round_double(
        e4m3, std::min(static_cast<double>(s_dec), e4m3.max_finite()), RoundingMode::nearest_even));
    const double scale = to_double(e4m3, code);
    q.scale_codes.push_back(code);
    q.scales.push_back(scale);
    const float inv = scale == 0 ? 0.0f : fp32(static_cast<double>(s_enc) / scale);
    for (std::size_t i = b0; i < b1; ++i)
      q.elements[i] = round_saturating(e2m1, fp32(values[i] * static_cast<double>(inv)), rounding, i);
  }
  return q;
}

std::vector<double> dequantize(const BlockQuantized& q) {
  std::vector<double> out(q.elements.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = q.elements[i] * q.scales[i / q.block] * q.tensor_scale;
  return out;
}

}  // namespace rpsim
