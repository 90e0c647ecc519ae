// The accumulation kinds (accumulation.hpp), one row each: the spec-string
// name and aliases, the parser of spec parts, the builder from JSON, the
// writer of spec(), the help line and the cost the run plan charges. A new
// kind is one row of accumulation_kinds() (accumulation_kinds.cpp) plus its
// tests; parse(), from_json(), spec(), help and the error listing the kinds
// are read from the table.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"

namespace rpsim::sim {

struct AccumulationKind {
  const char* name;     // the first spec part: "blocked"
  const char* aliases;  // other first parts it accepts, space separated ("" none)
  const char* usage;    // "blocked:B[:FMT[:RND]]"
  const char* help;     // one line for --help
  bool takes_seed;      // accepts a trailing :seed=N
  // The model of a spec split at ':' (parts[0] is the kind, a trailing
  // seed already removed); `spec` is what errors quote. Throws
  // AccumulationSpecError.
  AccumulationModel (*parse)(std::string_view spec, const std::vector<std::string>& parts,
                             std::uint64_t seed);
  // The model of a JSON object whose "kind" names this row.
  AccumulationModel (*from_json)(const nlohmann::json& j);
  // True when the model is of this kind; spec() is then asked for its string.
  bool (*is)(const AccumulationModel& m);
  std::string (*spec)(const AccumulationModel& m);
  // Extra seconds per emulated multiply-add over native binary32, for the
  // run plan's estimate (run_plan.cpp: measured, see its comment).
  double (*seconds_per_multiply_add)(const AccumulationModel& m);
  // Optional: other first parts this row takes (kernel presets: every
  // library of kernel_presets(), "cublas"); null for none.
  bool (*also_names)(std::string_view kind) = nullptr;
};

std::span<const AccumulationKind> accumulation_kinds();
// The row named `kind` (a name or an alias); nullptr when none is.
const AccumulationKind* find_accumulation_kind(std::string_view kind);
// The row a model is of (every model is of exactly one).
const AccumulationKind& accumulation_kind_of(const AccumulationModel& m);
// "sequential fma ... eigen" (the usages without their optional parts), for
// errors.
std::string accumulation_kind_names();
// One line per kind, "  USAGE  HELP", for --help.
std::string accumulation_kind_help();

}  // namespace rpsim::sim
