// The rows of the vocabulary table that lend names to rpsim's own
// vocabulary: Keras policy names, PyTorch GradScaler keywords, Transformer
// Engine DelayedScaling fields.
#include <fmt/format.h>

#include <algorithm>

#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/framework_config.hpp"
#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/train/config_error.hpp"
#include "vocabulary_rows.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

// keras.mixed_precision.Policy names and the rpsim policy each is.
struct KerasPolicy {
  const char* keras;
  const char* rpsim;
  const char* scaler;  // the loss scaler Keras gives it where the policy's default differs, or null
  const char* why;
};
const KerasPolicy kKeras[] = {
    // Keras 3's Model.compile wraps the optimizer in a LossScaleOptimizer
    // only when the policy's name is mixed_float16: "float16" (fp16
    // variables and compute) trains unscaled, where fp16-pure's default is
    // dynamic scaling.
    {"mixed_float16", "fp16-amp", "keras", "Keras 3 LossScaleOptimizer"},
    {"mixed_bfloat16", "bf16-amp", nullptr, ""},
    {"float16", "fp16-pure", "none", "Keras scales only under mixed_float16"},
    {"bfloat16", "bf16-pure", nullptr, ""},
    {"float32", "fp32", nullptr, ""},
    {"float64", "fp64", nullptr, ""},
};

// transformer_engine.common.recipe.DelayedScaling fields: those rpsim's fp8
// policy has (policy.fp8.<same name>), and those without meaning here
// (interval is deprecated and unread in TE 1.x; reduce_amax is across
// devices). FP8 attention would change the arithmetic: refused.
const char* const kRecipeFields[] = {"amax_history_len", "amax_compute_algo", "margin"};
const UnsimulatedField kRecipeIgnored[] = {
    {"interval", {}, ""},
    {"reduce_amax", {}, ""},
    {"fp8_dpa", false,
     "FP8 dot-product attention is not simulated (rpsim's fp8 policy quantises GEMM inputs)"},
    {"fp8_mha", false,
     "FP8 multi-head attention is not simulated (rpsim's fp8 policy quantises GEMM inputs)"},
};

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

// The policy name (a string, or an object's "name") the config gives, or null.
template <class Json>
Json* policy_name(Json& c) {
  if (!c.is_object() || !c.contains("policy")) return nullptr;
  Json& name = c["policy"].is_object() && c["policy"].contains("name") ? c["policy"]["name"] : c["policy"];
  return name.is_string() ? &name : nullptr;
}

// The Keras row the config's policy names, or null.
const KerasPolicy* keras_policy(const json& c) {
  const json* name = policy_name(c);
  for (const auto& k : kKeras)
    if (name && name->get<std::string>() == k.keras) return &k;
  return nullptr;
}

void translate_keras(Translation& t, KeyReport&) {
  json& c = t.config;
  const KerasPolicy* k = keras_policy(c);
  if (!k) return;
  *policy_name(c) = k->rpsim;
  t.notes.push_back(fmt::format("policy {} (Keras) -> policy {}", k->keras, k->rpsim));
  if (k->scaler && !c.contains("loss_scaler") && !c.contains("grad_scaler")) {
    c["loss_scaler"] = {{"policy", k->scaler}};
    t.notes.push_back(fmt::format("policy {} -> loss_scaler {} ({})", k->keras, k->scaler, k->why));
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
  if (g.contains("device")) t.ignored.push_back("grad_scaler.device");
  if (g.contains("enabled") && !boolean(g["enabled"], "grad_scaler.enabled")) {
    // GradScaler(enabled=False) reads none of its other keywords: listed, not translated.
    for (const auto& [k, v] : g.items())
      if (k != "enabled" && k != "device") t.ignored.push_back("grad_scaler." + k + " (enabled is false)");
    c["loss_scaler"] = {{"policy", "none"}};
    t.notes.push_back("grad_scaler.enabled false -> loss_scaler none");
    return;
  }
  json s = {{"policy", "pytorch"}};
  for (const auto& [k, v] : g.items())
    if (std::find(fields.begin(), fields.end(), k) != fields.end()) {
      s[k] = v;
      t.notes.push_back(fmt::format("grad_scaler.{} -> loss_scaler.{}", k, k));
    }
  t.notes.push_back("grad_scaler -> loss_scaler pytorch (torch.amp.GradScaler)");
  c["loss_scaler"] = s;
}

// DelayedScaling.override_linear_precision: (fprop, dgrad, wgrad), each true
// running that GEMM in higher precision than FP8. Only (false, false, false),
// TE's default, is rpsim's fp8 policy.
void refuse_linear_override(const json& r) {
  if (!r.contains("override_linear_precision")) return;
  const std::string path = "fp8_recipe.override_linear_precision";
  const json& o = r["override_linear_precision"];
  if (!o.is_array() || o.size() != 3)
    fail(path, "expected three booleans (fprop, dgrad, wgrad), got " + o.dump());
  for (std::size_t i = 0; i < 3; ++i)
    if (boolean(o[i], fmt::format("{}[{}]", path, i)))
      fail(path,
           fmt::format("{} keeps a GEMM out of FP8, which is not simulated (only [false, false, false], "
                       "TE's default, is)",
                       o.dump()));
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
  std::vector<std::string> known{"fp8_format", "override_linear_precision"};
  for (const char* k : kRecipeFields) known.emplace_back(k);
  for (const auto& k : kRecipeIgnored) known.emplace_back(k.name);
  if (!check_object_keys(r, known, "fp8_recipe", report)) return;
  refuse_linear_override(r);
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
  ignore_unsimulated(r, "fp8_recipe", kRecipeIgnored, t);
  if (r.contains("override_linear_precision")) t.ignored.push_back("fp8_recipe.override_linear_precision");
  policy["fp8"] = fp8;
  c["policy"] = policy;
}

bool has_keras_policy(const json& c) {
  return keras_policy(c) != nullptr;
}

std::vector<FieldName> grad_scaler_names() {
  // GradScaler keywords are rpsim's loss_scaler fields under PyTorch's names.
  return {{"grad_scaler", "loss_scaler"}};
}

const RefusedFields kRecipeRefused[] = {{"fp8_recipe", kRecipeIgnored}};

}  // namespace

const FrameworkVocabulary& keras_vocabulary() {
  static const FrameworkVocabulary row{
      .name = "keras",
      .framework = "Keras",
      .scope = VocabularyScope::inside,
      .read_as = "",
      .notes_heading = "",
      .recognised_by =
          "\"policy\" names a keras.mixed_precision.Policy (mixed_float16, mixed_bfloat16, float16, "
          "bfloat16, float32, float64)",
      .help =
          "the Keras policy becomes rpsim's (mixed_float16 -> fp16-amp with Keras 3's LossScaleOptimizer, "
          "float16 -> fp16-pure unscaled, ...)",
      .recognise = has_keras_policy,
      .translate = translate_keras,
      .field_names = nullptr,
      .extension_keys = nullptr,
      .ignored = {},
      .refused = {},
  };
  return row;
}

const FrameworkVocabulary& grad_scaler_vocabulary() {
  static const FrameworkVocabulary row{
      .name = "pytorch-gradscaler",
      .framework = "PyTorch",
      .scope = VocabularyScope::inside,
      .read_as = "",
      .notes_heading = "",
      .recognised_by = "a \"grad_scaler\" block: torch.amp.GradScaler(...)'s keyword arguments",
      .help =
          "grad_scaler becomes loss_scaler pytorch with the same fields (enabled false: no scaling; device "
          "ignored); give it or loss_scaler, not both",
      .recognise = [](const json& c) { return c.is_object() && c.contains("grad_scaler"); },
      .translate = translate_grad_scaler,
      .field_names = grad_scaler_names,
      .extension_keys = [] { return std::vector<std::string>{"grad_scaler"}; },
      .ignored = {},
      .refused = {},
  };
  return row;
}

const FrameworkVocabulary& fp8_recipe_vocabulary() {
  static const FrameworkVocabulary row{
      .name = "transformer-engine",
      .framework = "Transformer Engine",
      .scope = VocabularyScope::inside,
      .read_as = "",
      .notes_heading = "",
      .recognised_by = "an \"fp8_recipe\" block: transformer_engine.common.recipe.DelayedScaling's fields",
      .help =
          "fp8_recipe becomes policy fp8 with delayed scaling (fp8_format E4M3 or HYBRID, amax_history_len, "
          "amax_compute_algo, margin); give it or policy, not both",
      .recognise = [](const json& c) { return c.is_object() && c.contains("fp8_recipe"); },
      .translate = translate_recipe,
      .field_names = nullptr,
      .extension_keys = [] { return std::vector<std::string>{"fp8_recipe"}; },
      .ignored = {},
      .refused = kRecipeRefused,
  };
  return row;
}

}  // namespace rpsim::sim::config
