// The tables of `rpsim grads` (gradient_report.hpp).
#include "rpsim/scaling/gradient_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <stdexcept>

#include "rpsim/scaling/gradient_range.hpp"

namespace rpsim::sim::scaling {
namespace {

// CSV-safe: names with a comma or quote are quoted.
std::string cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string group_of(const std::string& name) {
  for (const char* g : {"act_grad", "param_grad"})
    if (name.rfind(std::string(g) + "/", 0) == 0) return g;
  return "other";
}

void histogram_rows(const std::string& name, const GradientSample& s, std::string& csv) {
  const double entries = double(std::max<std::int64_t>(1, s.entries()));
  csv += fmt::format("{},zero,{},{}\n", cell(name), s.zeros(), double(s.zeros()) / entries);
  if (s.nonfinite())
    csv += fmt::format("{},nonfinite,{},{}\n", cell(name), s.nonfinite(), double(s.nonfinite()) / entries);
  for (const auto& [e, n] : s.log2_histogram())
    csv += fmt::format("{},{},{},{}\n", cell(name), e, n, double(n) / entries);
}

void range_rows(const std::vector<std::unique_ptr<GradientSample>>& samples,
                const std::vector<std::string>& groups, const Format& fmt, int lo, int hi,
                GradientReport& r) {
  for (const char* group : {"act_grad", "param_grad", "all"}) {
    std::vector<const GradientSample*> picked;
    std::int64_t nonzero = 0;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (std::string(group) != "all" && groups[i] != group) continue;
      picked.push_back(samples[i].get());
      nonzero += samples[i]->entries() - samples[i]->zeros() - samples[i]->nonfinite();
    }
    if (picked.empty()) continue;
    const ScaleRange s = suggested_scale_range(picked, fmt, lo, hi);
    const double under = nonzero > 0 && s.any ? double(s.underflow) / double(nonzero) : NAN;
    r.scale_range_csv +=
        fmt::format("{},{},{},{},{},{}\n", cell(fmt.name), group, int(s.any),
                    s.any ? std::to_string(s.lo_log2) : "", s.any ? std::to_string(s.hi_log2) : "", under);
    // No non-zero finite value (empty or all-zero tensors): no fraction to give.
    const std::string lost = nonzero > 0 ? fmt::format("{:.4g}% of non-zero values underflow", 100 * under)
                                         : std::string("no non-zero finite value to lose");
    r.findings.push_back(
        s.any ? fmt::format("{:>9} {:>10}: scales 2^{}..2^{} overflow nothing "
                            "and lose the fewest ({})",
                            fmt.name, group, s.lo_log2, s.hi_log2, lost)
              : fmt::format("{:>9} {:>10}: every scale 2^{}..2^{} overflows", fmt.name, group, lo, hi));
  }
}

// What the per-format lines rest on, said first: NaN and infinity in the
// dump (a gradient that already overflowed: counted, outside every fraction
// of finite values), and tensors named without act_grad/ or param_grad/,
// which only the "all" group holds.
void input_findings(std::span<const NamedValues> tensors,
                    const std::vector<std::unique_ptr<GradientSample>>& samples,
                    const std::vector<std::string>& groups, GradientReport& r) {
  std::int64_t nonfinite = 0;
  std::vector<std::string> with_nonfinite, other;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (samples[i]->nonfinite() > 0) {
      nonfinite += samples[i]->nonfinite();
      with_nonfinite.push_back(tensors[i].name);
    }
    if (groups[i] == "other") other.push_back(tensors[i].name);
  }
  auto first = [](const std::vector<std::string>& names) {
    return fmt::format("'{}'{}", names.front(),
                       names.size() > 1 ? fmt::format(" and {} more", names.size() - 1) : "");
  };
  if (nonfinite > 0)
    r.findings.push_back(
        fmt::format("non-finite: {} NaN or infinite values in {} tensor(s) ({}), counted in the "
                    "nonfinite columns and left out of the fractions",
                    nonfinite, with_nonfinite.size(), first(with_nonfinite)));
  if (!other.empty())
    r.findings.push_back(
        fmt::format("ungrouped: {} tensor(s) named without act_grad/ or param_grad/ ({}) are in "
                    "the 'all' group only",
                    other.size(), first(other)));
}

}  // namespace

GradientReport gradient_report(std::span<const NamedValues> tensors, std::span<const Format* const> formats,
                               int min_log2, int max_log2) {
  if (tensors.empty()) throw std::invalid_argument("no tensors to analyse");
  if (min_log2 > max_log2)
    throw std::invalid_argument(fmt::format("scale range 2^{}..2^{} is empty", min_log2, max_log2));
  GradientReport r;
  r.fractions_csv =
      "tensor,format,log2_scale,scale,entries,zeros,nonfinite,"
      "underflow_fraction,subnormal_fraction,"
      "overflow_fraction\n";
  r.histogram_csv = "tensor,log2_abs_bin,count,fraction_of_entries\n";
  r.scale_range_csv = "format,group,found,min_log2_scale,max_log2_scale,underflow_fraction\n";
  std::vector<std::unique_ptr<GradientSample>> samples;
  std::vector<std::string> groups;
  for (const NamedValues& t : tensors) {
    samples.push_back(std::make_unique<GradientSample>(t.values));
    groups.push_back(group_of(t.name));
    histogram_rows(t.name, *samples.back(), r.histogram_csv);
  }
  input_findings(tensors, samples, groups, r);
  for (const Format* fmt : formats) {
    for (std::size_t i = 0; i < tensors.size(); ++i)
      for (int k = min_log2; k <= max_log2; ++k) {
        const CastCounts c = samples[i]->cast(*fmt, std::ldexp(1.0, k));
        r.fractions_csv +=
            fmt::format("{},{},{},{},{},{},{},{},{},{}\n", cell(tensors[i].name), cell(fmt->name), k,
                        std::ldexp(1.0, k), c.entries, c.zeros, c.nonfinite, c.underflow_fraction(),
                        c.subnormal_fraction(), c.overflow_fraction());
      }
    range_rows(samples, groups, *fmt, min_log2, max_log2, r);
  }
  return r;
}

}  // namespace rpsim::sim::scaling
