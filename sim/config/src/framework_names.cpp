// Framework names inside rpsim's own vocabulary: Keras policy names,
// PyTorch GradScaler keywords, Transformer Engine DelayedScaling fields.
#include <fmt/format.h>

#include <algorithm>

#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/framework_config.hpp"
#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

// keras.mixed_precision.Policy names and the rpsim policy each is.
struct KerasPolicy {
  const char* keras;
  const char* rpsim;
  const char* scaler;  // the loss scaler Keras adds, or null
};
const KerasPolicy kKeras[] = {
    // Keras wraps the optimizer in a LossScaleOptimizer under mixed_float16.
    {"mixed_float16", "fp16-amp", "keras"},
    {"mixed_bfloat16", "bf16-amp", nullptr},
    {"float32", "fp32", nullptr},
};

// transformer_engine.common.recipe.DelayedScaling fields: those rpsim's fp8
// policy has (policy.fp8.<same name>), and those without meaning here.
const char* const kRecipeFields[] = {"amax_history_len", "amax_compute_algo", "margin"};
const char* const kRecipeIgnored[] = {"interval", "override_linear_precision", "reduce_amax", "fp8_dpa",
                                      "fp8_mha"};

// torch.amp.GradScaler keywords: the pytorch row of the loss-scaler table
// (its fields are GradScaler's own names), plus enabled and device.
std::vector<std::string> grad_scaler_fields() {
  std::vector<std::string> out;
  for (const auto& row : loss_scalers())
    if (row.name == "pytorch")
      for (const auto& f : scaler_fields())
        if (row.fields & f.bit) out.emplace_back(f.name);
  return out;
}

void translate_keras(Translation& t) {
  json& c = t.config;
  if (!c.contains("policy")) return;
  json& name = c["policy"].is_object() && c["policy"].contains("name") ? c["policy"]["name"] : c["policy"];
  if (!name.is_string()) return;
  for (const auto& k : kKeras) {
    if (name.get<std::string>() != k.keras) continue;
    name = k.rpsim;
    t.notes.push_back(fmt::format("policy {} (Keras) -> policy {}", k.keras, k.rpsim));
    if (k.scaler && !c.contains("loss_scaler") && !c.contains("grad_scaler")) {
      c["loss_scaler"] = {{"policy", k.scaler}};
      t.notes.push_back(
          fmt::format("policy {} -> loss_scaler {} (Keras 3 LossScaleOptimizer)", k.keras, k.scaler));
    }
  }
}

void translate_grad_scaler(Translation& t, KeyReport& report) {
  json& c = t.config;
  const json g = c["grad_scaler"];
  c.erase("grad_scaler");
  if (c.contains("loss_scaler")) {
    report.problem(
        "grad_scaler: this config also has loss_scaler; give the scaler once: as grad_scaler (PyTorch's "
        "keywords) or as loss_scaler (rpsim's, e.g. loss_scaler.init_scale)");
    return;
  }
  const auto fields = grad_scaler_fields();
  std::vector<std::string> known = fields;
  known.insert(known.end(), {"enabled", "device"});
  if (!check_object_keys(g, known, "grad_scaler", report)) return;
  json s = {{"policy", "pytorch"}};
  for (const auto& [k, v] : g.items())
    if (std::find(fields.begin(), fields.end(), k) != fields.end()) {
      s[k] = v;
      t.notes.push_back(fmt::format("grad_scaler.{} -> loss_scaler.{}", k, k));
    }
  if (g.contains("device")) t.ignored.push_back("grad_scaler.device");
  if (g.contains("enabled") && !boolean(g["enabled"], "grad_scaler.enabled")) {
    s = {{"policy", "none"}};
    t.notes.push_back("grad_scaler.enabled false -> loss_scaler none");
  } else {
    t.notes.push_back("grad_scaler -> loss_scaler pytorch (torch.amp.GradScaler)");
  }
  c["loss_scaler"] = s;
}

void translate_recipe(Translation& t, KeyReport& report) {
  json& c = t.config;
  const json r = c["fp8_recipe"];
  c.erase("fp8_recipe");
  if (c.contains("policy")) {
    report.problem(
        "fp8_recipe: this config also has policy; give one: fp8_recipe (Transformer Engine's fields) or "
        "policy "
        "(rpsim's, e.g. policy.fp8.margin with policy.name fp8)");
    return;
  }
  std::vector<std::string> known{"fp8_format"};
  for (const char* k : kRecipeFields) known.emplace_back(k);
  for (const char* k : kRecipeIgnored) known.emplace_back(k);
  if (!check_object_keys(r, known, "fp8_recipe", report)) return;
  json policy = {{"name", "fp8"}};
  json fp8 = {{"scaling", "delayed"}};
  t.notes.push_back("fp8_recipe -> policy fp8 with delayed scaling (DelayedScaling)");
  if (r.contains("fp8_format")) {
    const std::string f = string(r["fp8_format"], "fp8_recipe.fp8_format");
    if (f == "E4M3") {
      // E4M3 in both passes: the backward inputs are e4m3 too.
      policy["ops"] = {{"linear", {{"compute", "e4m3"}, {"backward_compute", "e4m3"}}},
                       {"conv2d", {{"compute", "e4m3"}, {"backward_compute", "e4m3"}}}};
      t.notes.push_back("fp8_recipe.fp8_format E4M3 -> e4m3 forward and backward matmul inputs");
    } else if (f != "HYBRID") {
      fail("fp8_recipe.fp8_format", "expected \"E4M3\" or \"HYBRID\", got \"" + f + "\"");
    }
  }
  for (const char* k : kRecipeFields)
    if (r.contains(k)) {
      fp8[k] = r[k];
      t.notes.push_back(fmt::format("fp8_recipe.{} -> policy.fp8.{}", k, k));
    }
  for (const char* k : kRecipeIgnored)
    if (r.contains(k)) t.ignored.push_back(std::string("fp8_recipe.") + k);
  policy["fp8"] = fp8;
  c["policy"] = policy;
}

}  // namespace

const std::vector<std::string>& framework_extension_keys() {
  static const std::vector<std::string> keys{"grad_scaler", "fp8_recipe"};
  return keys;
}

void translate_framework_names(Translation& t, KeyReport& report) {
  translate_keras(t);
  if (t.config.contains("grad_scaler")) translate_grad_scaler(t, report);
  if (t.config.contains("fp8_recipe")) translate_recipe(t, report);
}

}  // namespace rpsim::sim::config
