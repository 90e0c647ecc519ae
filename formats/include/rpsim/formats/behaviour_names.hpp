// The names of a rounding's overflow behaviour and NaN policy, one table each
// (formats/src/behaviour_names.cpp): what a format spec's `overflow=` and the
// CUDA backend's C interface (rpsim_cuda_rounding) accept, and the list an
// error message gives.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rpsim/formats/format_desc.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

// infinity (or inf), nan, saturate; nullopt for any other text.
std::optional<Overflow> overflow_named(std::string_view name);
// x86 (or x86_sse), arm, riscv; nullopt for any other text.
std::optional<NanPolicy> nan_policy_named(std::string_view name);
// "infinity, nan or saturate" / "x86, arm or riscv": the names, for messages.
std::string overflow_names();
std::string nan_policy_names();

}  // namespace rpsim
