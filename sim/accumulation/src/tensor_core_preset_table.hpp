// The preset rows derived from MMA-Sim (tensor_core_preset_mmasim.cpp),
// appended to the measured ones by tensor_core_preset_rows(). Internal.
#pragma once

#include <span>

#include "rpsim/accumulation/tensor_core_presets.hpp"

namespace rpsim::sim::tc_detail {

std::span<const TensorCorePresetRow> mma_sim_preset_rows();

}  // namespace rpsim::sim::tc_detail
