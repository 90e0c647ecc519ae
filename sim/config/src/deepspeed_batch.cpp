// DeepSpeed's batch fields and gradient accumulation type in rpsim's terms
// (deepspeed_batch.hpp).
#include "deepspeed_batch.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "rpsim/config/config_keys.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

// data_types.grad_accum_dtype's spellings (DeepSpeed's DtypeEnum) and the
// format each names.
struct AccumDtype {
  const char* spelling;
  const char* format;
};
const AccumDtype kAccumDtypes[] = {
    {"fp32", "binary32"},          {"float32", "binary32"},       {"float", "binary32"},
    {"torch.float32", "binary32"}, {"fp16", "binary16"},          {"float16", "binary16"},
    {"half", "binary16"},          {"torch.float16", "binary16"}, {"bf16", "bfloat16"},
    {"bfloat16", "bfloat16"},      {"torch.bfloat16", "bfloat16"}};

// DeepSpeed's completion of the three batch fields with one device
// (runtime/config.py, _set_batch_related_parameters then _batch_assertion).
void set_batch(DeepSpeedBatch& d, Translation& t) {
  if (d.global == 0 && d.micro == 0) {
    if (d.accumulation > 0)
      fail("gradient_accumulation_steps",
           "needs train_batch_size or train_micro_batch_size_per_gpu (DeepSpeed asserts one is given)");
    return;  // rpsim's default batch, no accumulation
  }
  if (d.global > 0 && d.micro > 0 && d.accumulation == 0) d.accumulation = d.global / d.micro;
  if (d.global > 0 && d.micro == 0) d.micro = d.global / std::max<std::int64_t>(d.accumulation, 1);
  if (d.accumulation == 0) d.accumulation = 1;
  if (d.global == 0) d.global = d.micro * d.accumulation;
  if (d.global != d.micro * d.accumulation)
    fail("train_batch_size",
         fmt::format(
             "{} is not train_micro_batch_size_per_gpu {} x gradient_accumulation_steps {} (one simulated "
             "device; DeepSpeed asserts the same)",
             d.global, d.micro, d.accumulation));
  t.config["batch_size"] = d.global;
  t.config["gradient_accumulation_steps"] = d.accumulation;
  t.notes.push_back(fmt::format(
      "train_batch_size {} -> batch_size {}, gradient_accumulation_steps {} -> gradient_accumulation_steps "
      "{} "
      "(one simulated device: {} micro-batch{} of {} per optimizer step, their gradients accumulated)",
      d.global, d.global, d.accumulation, d.accumulation, d.accumulation, d.accumulation > 1 ? "es" : "",
      d.micro));
}

// The accumulator's format: data_types.grad_accum_dtype, else DeepSpeed's
// default (engine.py, get_data_types): fp32 for bf16 without ZeRO (the
// BF16_Optimizer's fp32 gradients), else the model's type: fp16 under fp16
// (FP16_Optimizer's fp16 .grad), bf16 under bf16 with ZeRO, fp32 without
// fp16/bf16.
void set_grad_accum(const json& ds, const DeepSpeedBatch& d, Translation& t) {
  const std::string policy = t.config.value("policy", "");
  const json zero = ds.value("zero_optimization", json());
  // A bare true is the deprecated spelling of stage 1 (zero/config.py, read_zero_config_deprecated).
  const bool zero_on = zero.is_boolean() ? zero.get<bool>()
                       : zero.is_object() && zero.contains("stage") && zero["stage"].is_number()
                           ? zero["stage"].get<double>() > 0
                           : false;
  if (d.accumulation <= 1 && d.grad_accum_dtype.empty()) return;  // nothing is accumulated
  std::string format = "binary32", why;
  if (!d.grad_accum_dtype.empty()) {
    for (const auto& a : kAccumDtypes)
      if (d.grad_accum_dtype == a.spelling) format = a.format;
    why = "data_types.grad_accum_dtype " + d.grad_accum_dtype;
  } else {
    format = policy == "fp16-amp" ? "binary16" : policy == "bf16-amp" && zero_on ? "bfloat16" : "binary32";
    why = fmt::format("DeepSpeed's default for {}{} (engine.py get_data_types)",
                      policy == "fp16-amp"   ? "fp16"
                      : policy == "bf16-amp" ? "bf16"
                                             : "fp32",
                      policy == "bf16-amp" ? zero_on ? " with ZeRO" : " without ZeRO" : "");
  }
  if (d.grad_accum_dtype.empty() && policy == "bf16-amp") {
    // ZeRO's stage chose the type: zero_optimization is not without meaning here.
    const auto z = std::find(t.ignored.begin(), t.ignored.end(), "zero_optimization");
    if (z != t.ignored.end()) t.ignored.erase(z);
  }
  t.config["grad_accum_format"] = format;
  t.notes.push_back(
      fmt::format("{} -> grad_accum_format {} (the micro-batch gradients summed in it)", why, format));
}

}  // namespace

// A batch field: DeepSpeed asserts each is > 0 (runtime/config.py, _batch_assertion).
std::int64_t batch_field(const json& v, const std::string& path) {
  const std::int64_t n = integer(v, path);
  if (n < 1) fail(path, fmt::format("must be at least 1, got {}", n));
  return n;
}

void read_data_types(const json& v, const std::string& path, KeyReport& report, DeepSpeedBatch& d) {
  if (!check_object_keys(v, {"grad_accum_dtype"}, path, report) || !v.contains("grad_accum_dtype")) return;
  const std::string key = join(path, "grad_accum_dtype");
  d.grad_accum_dtype = string(v["grad_accum_dtype"], key);
  for (const auto& a : kAccumDtypes)
    if (d.grad_accum_dtype == a.spelling) return;
  std::vector<std::string> names;
  for (const auto& a : kAccumDtypes) names.emplace_back(a.spelling);
  fail(key, fmt::format("\"{}\" is not a gradient accumulation type (DeepSpeed's: {})", d.grad_accum_dtype,
                        fmt::join(names, ", ")));
}

void translate_batch(DeepSpeedBatch& d, const json& ds, Translation& t) {
  set_batch(d, t);
  set_grad_accum(ds, d, t);
}

}  // namespace rpsim::sim::config
