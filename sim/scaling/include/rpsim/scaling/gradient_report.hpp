// `rpsim grads`: what each tensor of a user's gradient dump does when cast to
// a format at a loss scale (gradient_range.hpp's counts), its log2 histogram
// with the zero bin (Micikevicius et al. 2018, Fig. 3's form), and the static
// loss scales at which nothing overflows and the fewest values underflow.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "rpsim/formats/format.hpp"

namespace rpsim::sim::scaling {

// One tensor of a dump: "act_grad/layer1.0.conv1", "param_grad/fc.weight"
// (experiments/python/dump_grads.py's names) or any other name.
struct NamedValues {
  std::string name;
  std::span<const double> values;
};

struct GradientReport {
  // tensor, format, log2_scale, scale, entries, zeros, nonfinite,
  // underflow_fraction, subnormal_fraction, overflow_fraction (of non-zero
  // finite values)
  std::string fractions_csv;
  // tensor, log2_abs_bin ("zero", "nonfinite" or floor(log2|v|)), count,
  // fraction_of_entries
  std::string histogram_csv;
  // format, group (act_grad, param_grad, all), found, min_log2_scale,
  // max_log2_scale, underflow_fraction (of the group's non-zero values, at
  // those scales)
  std::string scale_range_csv;
  std::vector<std::string> findings;  // one line per format and group
};

// Scales 2^min_log2 .. 2^max_log2 (min_log2 <= max_log2); throws
// std::invalid_argument naming a bad range or an empty tensor list.
GradientReport gradient_report(std::span<const NamedValues> tensors, std::span<const Format* const> formats,
                               int min_log2, int max_log2);

}  // namespace rpsim::sim::scaling
