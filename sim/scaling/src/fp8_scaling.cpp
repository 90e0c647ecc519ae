#include "rpsim/scaling/fp8_scaling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace rpsim::sim {

namespace {
constexpr std::pair<AmaxComputeAlgo, std::string_view> kAmaxComputeAlgos[] = {
    {AmaxComputeAlgo::max, "max"}, {AmaxComputeAlgo::most_recent, "most_recent"}};
}  // namespace

std::string_view amax_compute_algo_name(AmaxComputeAlgo algo) {
  for (const auto& [a, name] : kAmaxComputeAlgos)
    if (a == algo) return name;
  return "?";
}

std::optional<AmaxComputeAlgo> parse_amax_compute_algo(std::string_view name) {
  for (const auto& [a, n] : kAmaxComputeAlgos)
    if (n == name) return a;
  return std::nullopt;
}

DelayedScaling::DelayedScaling(const DelayedScalingConfig& config) : config_(config) {
  if (config.amax_history_len < 1)
    throw std::invalid_argument("DelayedScaling: amax_history_len must be at least 1, got 0");
  if (!(std::isfinite(config.fp8_max) && config.fp8_max > 0))
    throw std::invalid_argument(
        fmt::format("DelayedScaling: fp8_max must be positive and finite, got {}", config.fp8_max));
  // amax_and_scale_update: const float scaled_max = fp8_dtype_max(fp8_dtype) * std::pow(2.f, -margin);
  scaled_max_ = config.fp8_max * std::pow(2.f, static_cast<float>(-config.margin));
  history_.assign(config.amax_history_len, 0.0f);
}

void DelayedScaling::record_amax(float amax) {
  history_[0] = std::fmax(history_[0], amax);
}

void DelayedScaling::update() {
  const std::size_t length = history_.size();
  const float last_amax = history_[0];
  float amax = 0.0f;
  // kernel_bulk skips the roll (and leaves amax = 0 for "max") when the
  // step's amax is 0; `kernel` always rolls.
  const bool roll = !(config_.skip_update_on_zero_amax && last_amax == 0.0f);
  if (roll) {
    // Thread i reads a = (i < length - 1) ? history[i + 1] : last_amax, folds
    // it into amax with fmaxf, and writes history[i] = (i > 0) ? a : 0.
    std::vector<float> rolled(length);
    for (std::size_t i = 0; i < length; ++i) {
      const float a = (i < length - 1) ? history_[i + 1] : last_amax;
      amax = std::fmax(amax, a);
      rolled[i] = (i > 0) ? a : 0.0f;
    }
    history_ = std::move(rolled);
  }
  if (config_.amax_compute_algo == AmaxComputeAlgo::most_recent) amax = last_amax;

  float scale;
  if (std::isfinite(amax) && amax > 0)
    scale = scaled_max_ / amax;
  else
    scale = scale_;
  if (std::isinf(scale)) scale = std::numeric_limits<float>::max();
  scale_ = scale;
  scale_inv_ = 1.0f / scale;
}

float amax_of(std::span<const float> values) {
  float amax = 0.0f;
  for (const float v : values) amax = std::fmax(amax, std::fabs(v));
  return amax;
}

float current_scale_from_amax(float amax, const CurrentScalingConfig& config) {
  // NOTE (upstream): a NaN amax compares false here and is handled below.
  if (amax < config.amax_epsilon) amax = config.amax_epsilon;
  float scale = 1.0f;
  if (std::isinf(amax) || amax == 0.0f || std::isnan(amax)) return scale;
  scale = config.fp8_max / amax;  // __fdiv_rn
  if (std::isinf(scale)) scale = config.value_for_inf;
  if (config.force_pow_2_scales)
    scale = std::bit_cast<float>(std::bit_cast<std::uint32_t>(scale) & 0xFF800000u);
  return scale;
}

namespace {

// TE float_to_e8m0, the path for GPUs without cvt.rp.satfinite.ue8m0x2.f32
// (which rounds the same way: toward +inf, saturating at 2^127).
std::uint8_t te_float_to_e8m0(float val) {
  if (std::isnan(val)) return 0xFF;
  if (std::isinf(val)) return 0xFE;
  if (val == 0.0f) return 0x00;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(val);
  auto exponent = static_cast<std::uint8_t>(bits >> 23);  // e8m0_t: the sign bit falls off
  const std::uint32_t mantissa = bits & 0x7FFFFFu;
  // Round up exponent and deal with satfinite; a subnormal <= 2^-127 stays at code 0.
  if ((mantissa > 0 && exponent != 0xFE) && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
  return exponent;
}

float block_amax(std::span<const float> block, MxScaleRule rule) {
  if (rule == MxScaleRule::te_round_up) return amax_of(block);  // fmaxf: NaN elements ignored
  // microxcaling _shared_exponents: torch.max(torch.abs(A)) propagates NaN.
  float amax = 0.0f;
  for (const float v : block) {
    if (std::isnan(v)) return v;
    amax = std::max(amax, std::fabs(v));
  }
  return amax;
}

}  // namespace

std::uint8_t mx_scale_code(float amax, const Format& element, MxScaleRule rule) {
  if (rule == MxScaleRule::te_round_up) {
    // static constexpr float max_norm_rcp = 1.0 / max_norm;  (rounded once to float)
    const auto max_norm_rcp = static_cast<float>(1.0 / element.max_finite());
    return te_float_to_e8m0(amax * max_norm_rcp);
  }
  // OCP: shared_exp = floor(log2(amax + FP32_MIN_NORMAL * (amax == 0))) - emax,
  // > 127 -> NaN, < -127 -> -127. floor(log2) is taken exactly here (from the
  // exponent), where microxcaling evaluates torch.log2 in binary32.
  if (std::isnan(amax) || std::isinf(amax)) return 0xFF;
  const float a = amax == 0.0f ? std::numeric_limits<float>::min() : std::fabs(amax);
  const int shared_exp = std::ilogb(a) - element.emax;
  if (shared_exp > 127) return 0xFF;
  return static_cast<std::uint8_t>(std::max(shared_exp, -127) + 127);
}

std::vector<std::uint8_t> mx_block_scale_codes(std::span<const float> values, const Format& element,
                                               MxScaleRule rule, std::size_t block_size) {
  if (block_size == 0)
    throw std::invalid_argument("mx_block_scale_codes: block_size must be at least 1, got 0");
  std::vector<std::uint8_t> codes;
  codes.reserve((values.size() + block_size - 1) / block_size);
  for (std::size_t start = 0; start < values.size(); start += block_size) {
    const auto block = values.subspan(start, std::min(block_size, values.size() - start));
    codes.push_back(mx_scale_code(block_amax(block, rule), element, rule));
  }
  return codes;
}

float e8m0_to_float(std::uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

}  // namespace rpsim::sim
