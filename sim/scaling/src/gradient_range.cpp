// Cast counts of gradient samples at a loss scale (gradient_range.hpp).
#include "rpsim/scaling/gradient_range.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim::sim::scaling {
namespace {

enum class Lands { zero, subnormal, normal, overflow };

// Where fl(m * scale) lands for the magnitude m with the given sign, by the
// formats core itself (round_double, nearest even).
Lands lands(const Format& fmt, double m, bool negative, double scale) {
  Flags flags = 0;
  const double x = negative ? -(m * scale) : m * scale;
  if (!std::isfinite(x)) return Lands::overflow;  // beyond binary64 before the cast
  const std::uint64_t bits = round_double(fmt, x, Rounding{}, flags);
  if (flags & flag_overflow) return Lands::overflow;
  if (to_double(fmt, bits) == 0) return Lands::zero;
  return is_subnormal(fmt, bits) ? Lands::subnormal : Lands::normal;
}

// Counts one sign's sorted magnitudes: each class is a contiguous run, since
// fl(m * scale) is monotone in m.
void count_sorted(const std::vector<double>& sorted, bool negative, const Format& fmt, double scale,
                  CastCounts& c) {
  auto first_at_least = [&](Lands l) {
    return std::partition_point(sorted.begin(), sorted.end(),
                                [&](double m) { return lands(fmt, m, negative, scale) < l; });
  };
  const auto sub = first_at_least(Lands::subnormal), normal = first_at_least(Lands::normal),
             over = first_at_least(Lands::overflow);
  c.underflow += sub - sorted.begin();
  c.subnormal += normal - sub;
  c.overflow += sorted.end() - over;
}

}  // namespace

GradientSample::GradientSample(std::span<const double> values) : entries_(std::int64_t(values.size())) {
  for (double v : values) {
    if (!std::isfinite(v))
      ++nonfinite_;
    else if (v == 0)
      ++zeros_;
    else
      (v > 0 ? positive_ : negative_).push_back(std::fabs(v));
  }
  std::sort(positive_.begin(), positive_.end());
  std::sort(negative_.begin(), negative_.end());
}

CastCounts GradientSample::cast(const Format& fmt, double scale) const {
  if (!(scale > 0) || !std::isfinite(scale))
    throw std::invalid_argument("loss scale " + std::to_string(scale) + " is not a positive finite number");
  CastCounts c;
  c.entries = entries_;
  c.zeros = zeros_;
  c.nonfinite = nonfinite_;
  count_sorted(positive_, false, fmt, scale, c);
  count_sorted(negative_, true, fmt, scale, c);
  return c;
}

std::map<int, std::int64_t> GradientSample::log2_histogram() const {
  std::map<int, std::int64_t> h;
  for (const auto* side : {&positive_, &negative_})
    for (double m : *side) ++h[std::ilogb(m)];
  return h;
}

ScaleRange suggested_scale_range(std::span<const GradientSample* const> samples, const Format& fmt,
                                 int min_log2, int max_log2) {
  ScaleRange best;
  for (int e = min_log2; e <= max_log2; ++e) {
    std::int64_t under = 0, over = 0;
    for (const GradientSample* s : samples) {
      const CastCounts c = s->cast(fmt, std::ldexp(1.0, e));
      under += c.underflow;
      over += c.overflow;
    }
    if (over > 0) continue;
    if (!best.any || under < best.underflow) {
      best = {true, e, e, under};
    } else if (under == best.underflow && best.hi_log2 == e - 1) {
      best.hi_log2 = e;  // the range grows while the minimum holds
    }
  }
  return best;
}

}  // namespace rpsim::sim::scaling
