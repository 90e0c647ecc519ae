// Spec strings and JSON of accumulation models (accumulation.hpp): the
// shared token helpers, the Tensor Core model's field table, and the parsers
// and writers of the tc:, kernel: and preset kinds. Internal to
// sim/accumulation.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"

namespace rpsim::sim::spec_detail {

std::vector<std::string> split_colon(std::string_view s);
// Throws AccumulationSpecError "accumulation model 'SPEC': WHY".
[[noreturn]] void bad(std::string_view spec, const std::string& why);
Format parse_fmt(std::string_view spec, const std::string& token);
RoundingMode parse_rnd(std::string_view spec, const std::string& token);
// A field's integer value; throws std::invalid_argument "NAME='V' is not an integer".
int field_int(const char* name, const std::string& v);

// The Tensor Core model's fields a user may override on top of a preset, in
// the spec string (`tc:h100:fp16:fp32:terms_per_step=8`) and in JSON alike;
// spec() writes back those that differ from the preset, so a customised
// model is recorded in results as what it is.
struct TcField {
  const char* name;
  std::string (*get)(const TensorCoreModel&);
  void (*set)(TensorCoreModel&, const std::string&);  // throws std::invalid_argument
};
const std::vector<TcField>& tc_fields();
const TcField* find_tc_field(std::string_view name);
std::string tc_field_names();

// How many leading parts are positional (no '='); throws
// std::invalid_argument when a positional part follows a key=value one.
std::size_t positional_parts(const std::vector<std::string>& parts);

// Block-scale formats by their PTX names: "ue8m0" (E8M0) and "ue4m3" (E4M3,
// its sign ignored); throws std::invalid_argument naming the value.
Format parse_scale_format(const std::string& name);
std::string scale_format_name(const Format& scale);
// The block a scale format means when none is given: 32 (MX), 16 (NVFP4).
int default_scale_block(const Format& scale);

// tc:PRESET[:IN[:OUT[:INSTR]]][:input_b=F][:scale=ue8m0|ue4m3[:scale_block=16|32]][:FIELD=VALUE...]
// (parts split at ':').
TensorCoreModel parse_tc(std::string_view spec, const std::vector<std::string>& parts);
std::string tc_spec(const TensorCoreModel& m);

// kernel:GPU:IN:OUT[:INSTR][:FIELD=VALUE...] (kernel_schedule.hpp).
KernelSchedule parse_kernel(std::string_view spec, const std::vector<std::string>& parts);
std::string kernel_spec(const KernelSchedule& s);
// LIB:GPU:IN:OUT[:rpr=R], a row of kernel_presets().
KernelPreset parse_kernel_preset(std::string_view spec, const std::vector<std::string>& parts);
std::string kernel_preset_spec(const KernelPreset& p);
// True when `lib` is the library of a kernel_presets() row ("cublas").
bool is_kernel_preset_library(std::string_view lib);
// A JSON object of kind "kernel", "cublas" or "tc" (with "gpu") as the parts
// its spec would split into: kind, gpu, input, output[, instruction], then
// key=value for every other field. No spec string is built.
std::vector<std::string> kernel_json_parts(const nlohmann::json& j);

}  // namespace rpsim::sim::spec_detail
