// Shared by the named policies (policy.cpp) and their JSON overrides
// (policy_json.cpp).
#pragma once

#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {

// Builds the op table of `p` from its autocast lists and format: allow-list
// ops in the low format, deny-list ops in binary32, the rest following their
// inputs; without autocast every op in `base`. Matmuls accumulate under `acc`.
void fill_ops(PrecisionPolicy& p, const Format& base, const sim::AccumulationModel& acc);

}  // namespace rpsim::sim::train
