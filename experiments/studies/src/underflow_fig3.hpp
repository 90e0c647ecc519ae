// Study 3's Micikevicius et al. 2018 Fig. 3 part: histograms of activation
// gradients by binade with the zero bin, per layer and for the whole network,
// and what fp16 does to them at each loss scale (internal to the studies).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "rpsim/formats/format.hpp"
#include "rpsim/study/training_runs.hpp"

namespace rpsim::sim::study {

// Values by binade: floor(log2 |g|) -> count, plus the zero and non-finite bins.
struct Log2Histogram {
  std::map<int, std::int64_t> bins;
  std::int64_t zeros = 0, nonfinite = 0;
  std::int64_t nonzero() const;
  std::int64_t entries() const { return nonzero() + zeros + nonfinite; }
  void add(const Log2Histogram& other);
};

// What a cast to `fmt` (nearest even) at loss scale 2^k does to a histogram,
// bin by bin: a binade [2^e, 2^(e+1)) underflows when 2^(e+k+1) is at most
// half the smallest subnormal, lands in the subnormal range when e + k is
// between that and emin - 1, and overflows when e + k > emax. The binade
// holding the exact tie (2^-25 for fp16) and the top one (values >= 65520
// overflow) straddle their edge: both count as representable, so the
// underflow and overflow here are lower bounds, off by those single binades.
struct BinnedCast {
  std::int64_t underflow = 0, subnormal = 0, overflow = 0;
};
BinnedCast binned_cast(const Log2Histogram& h, const Format& fmt, int log2_scale);

// The activation-gradient histograms of one training run's FP64 shadow at
// `step`, per layer (the gradient arriving at the layer's output).
std::map<std::string, Log2Histogram> shadow_activation_histograms(const TextTable& histograms,
                                                                  std::int64_t step);

// fig3_histogram.csv and fig3_summary.csv: the MLP of the loss-scale runs
// (`mlp`, its shadow needs no run of its own), the networks of the config's
// "fig3" object trained for the purpose.
void fig3_tables(const StudyConfig& cfg, const TrainingRun& mlp, StudyOutput& out);

}  // namespace rpsim::sim::study
