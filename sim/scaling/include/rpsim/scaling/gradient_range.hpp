// Where a tensor's values land when cast to a format at a loss scale: the
// counts Micikevicius et al. 2018 reason with (Sec. 3.2, Fig. 3) when they
// choose a loss scale. For each value v, fl(v * scale) is v times the scale
// in binary64 (exact for a power of two) rounded once to the format, to
// nearest even (what a framework's cast does):
//   underflow  v != 0 and fl(v * scale) == 0        (the gradient is lost)
//   subnormal  fl(v * scale) is a non-zero subnormal (kept with fewer bits;
//              fixed point and formats without subnormals have none)
//   overflow   the rounding overflows: infinity, NaN or saturation
// Non-finite inputs are counted apart and belong to no class. Counting at
// many scales costs two sorts per tensor and a few binary searches per scale.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "rpsim/formats/format.hpp"

namespace rpsim::sim::scaling {

struct CastCounts {
  std::int64_t entries = 0;    // all values
  std::int64_t zeros = 0;      // exactly zero before the cast
  std::int64_t nonfinite = 0;  // inf or NaN before the cast
  std::int64_t underflow = 0, subnormal = 0, overflow = 0;
  std::int64_t nonzero() const { return entries - zeros - nonfinite; }
  // Fractions of the non-zero finite values (0 when there are none).
  double underflow_fraction() const { return fraction(underflow); }
  double subnormal_fraction() const { return fraction(subnormal); }
  double overflow_fraction() const { return fraction(overflow); }

 private:
  double fraction(std::int64_t n) const { return nonzero() > 0 ? double(n) / double(nonzero()) : 0.0; }
};

// The magnitudes of one tensor's values, sorted by sign.
class GradientSample {
 public:
  explicit GradientSample(std::span<const double> values);

  // The counts for a cast of every value, times `scale` (> 0, finite), to fmt.
  CastCounts cast(const Format& fmt, double scale) const;

  // Non-zero finite values by binade: floor(log2 |v|) -> count.
  std::map<int, std::int64_t> log2_histogram() const;
  std::int64_t entries() const { return entries_; }
  std::int64_t zeros() const { return zeros_; }
  std::int64_t nonfinite() const { return nonfinite_; }

 private:
  std::vector<double> positive_, negative_;  // magnitudes, ascending
  std::int64_t entries_ = 0, zeros_ = 0, nonfinite_ = 0;
};

// The loss scales 2^lo_log2 .. 2^hi_log2 at which no value of any sample
// overflows and, among those, the ones where the fewest underflow (summed
// over the samples). `any` is false when every candidate overflows.
struct ScaleRange {
  bool any = false;
  int lo_log2 = 0, hi_log2 = 0;
  std::int64_t underflow = 0;  // at the scales of the range
};
ScaleRange suggested_scale_range(std::span<const GradientSample* const> samples, const Format& fmt,
                                 int min_log2, int max_log2);

}  // namespace rpsim::sim::scaling
