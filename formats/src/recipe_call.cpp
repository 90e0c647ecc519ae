// The recipe row and options that reproduce a reference call, as the vector
// files' `call:` header writes it (recipe_check.hpp recipe_for_call).
#include <fmt/format.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "rpsim/formats/recipe_check.hpp"

namespace rpsim {

namespace {

using nlohmann::json;

[[noreturn]] void unsupported(const std::string& family, const std::string& key, const json& value,
                              const std::string& why) {
  throw std::invalid_argument(
      fmt::format("call: {} option {}={}: no recipe row reproduces it ({})", family, key, value.dump(), why));
}

// The reference's option `key`, or `fallback` where the call does not name it
// (aad3512's NVFP4 quantiser has fewer options).
json call_option(const json& options, const char* key, const json& fallback) {
  const auto it = options.find(key);
  return it == options.end() ? fallback : *it;
}

std::string call_tile(const json& shape) {
  return fmt::format("{}x{}", shape.at(0).get<int>(), shape.at(1).get<int>());
}

std::string flag_text(bool b) {
  return b ? "true" : "false";
}

RecipeOptions nvfp4_call(const json& o) {
  const std::string f = "te_nvfp4";
  RecipeOptions r;
  const std::string version = call_option(o, "version", "head").get<std::string>();
  if (version != "head" && version != "aad3512") unsupported(f, "version", version, "head or aad3512");
  r["formula"] = version == "head" ? "te-2026-03" : "te-2026-02";
  if (call_option(o, "pow_2_scales", false).get<bool>())
    unsupported(f, "pow_2_scales", true, "the reference's MXFP4 mode raises at both commits");
  if (call_option(o, "eps", 0.0).get<double>() != 0.0)
    unsupported(f, "eps", o.at("eps"), "the reference ignores it");
  const bool rowwise = call_option(o, "rowwise", true).get<bool>(),
             columnwise = call_option(o, "columnwise", true).get<bool>();
  if (rowwise == columnwise) unsupported(f, "rowwise", rowwise, "one of rowwise and columnwise per file");
  r["direction"] = rowwise ? "rowwise" : "columnwise";
  r["tile"] = call_tile(call_option(o, "quant_tile_shape", json::array({1, 16})));
  const bool rht = call_option(o, "with_rht", false).get<bool>();
  if (rht && !call_option(o, "with_random_sign_mask", true).get<bool>())
    unsupported(f, "with_random_sign_mask", false, "the rows use TE's fixed sign vector");
  r["rht"] = flag_text(rht);
  r["row_scaled"] = flag_text(call_option(o, "row_scaled_nvfp4", false).get<bool>());
  if (call_option(o, "nvfp4_use_4over6", false).get<bool>()) {
    std::string mode = call_option(o, "nvfp4_4over6_err_mode", "MAE").get<std::string>();
    for (char& c : mode) c = char(std::tolower(static_cast<unsigned char>(c)));
    r["four_over_six"] = mode;
    r["fast_math"] = flag_text(call_option(o, "nvfp4_4over6_err_use_fast_math", false).get<bool>());
    r["e4m3_max"] = std::to_string(call_option(o, "nvfp4_e4m3_max", 448).get<int>());
  }
  return r;
}

RecipeOptions mx_call(const json& o) {
  const std::string f = "ao_mx";
  const std::string dtype = o.at("elem_dtype").get<std::string>();
  std::string element;
  for (const auto& [ao, ours] :
       {std::pair{"float8_e4m3fn", "e4m3"}, std::pair{"float8_e5m2", "e5m2"}, std::pair{"fp6_e2m3", "e2m3"},
        std::pair{"fp6_e3m2", "e3m2"}, std::pair{"float4_e2m1fn_x2", "e2m1"}})
    if (dtype == ao) element = ours;
  if (element.empty()) unsupported(f, "elem_dtype", dtype, "not an MX element dtype");
  if (call_option(o, "is_swizzled_scales", false).get<bool>())
    unsupported(f, "is_swizzled_scales", true, "scales are compared in their plain layout");
  return {{"element", element},
          {"block", std::to_string(o.at("block_size").get<int>())},
          {"scale_rule", o.at("scaling_mode").get<std::string>()}};
}

std::string fp8_element_name(const std::string& family, const char* key, const std::string& dtype) {
  if (dtype == "float8_e4m3fn" || dtype == "kFloat8E4M3") return "e4m3";
  if (dtype == "float8_e5m2" || dtype == "kFloat8E5M2") return "e5m2";
  unsupported(family, key, dtype, "e4m3 or e5m2");
}

RecipeOptions fp8_call(const json& o, bool block) {
  const std::string f = block ? "te_fp8block" : "te_fp8tensor";
  for (const char* key : {"eps", "amax_epsilon"})
    if (call_option(o, key, 0.0).get<double>() != 0.0) unsupported(f, key, o.at(key), "eps 0 only");
  if (call_option(o, "return_transpose", false).get<bool>())
    unsupported(f, "return_transpose", true, "the transpose is the same function on x^T");
  if (call_option(o, "munge_scale_shapes", false).get<bool>())
    unsupported(f, "munge_scale_shapes", true, "scales are compared in their plain layout");
  if (!block)
    return {{"element", fp8_element_name(f, "fp8_dtype", o.at("fp8_dtype").get<std::string>())},
            {"pow2", flag_text(o.at("force_pow_2_scales").get<bool>())}};
  return {{"element", fp8_element_name(f, "quant_dtype", o.at("quant_dtype").get<std::string>())},
          {"tile", call_tile(o.at("quant_tile_shape"))},
          {"pow2", flag_text(o.at("pow_2_scales").get<bool>())}};
}

}  // namespace

std::pair<std::string, RecipeOptions> recipe_for_call(const std::string& call_json, std::size_t* rows,
                                                      std::size_t* cols) {
  json j;
  try {
    j = json::parse(call_json);
    const json& shape = j.at("shape");
    if (shape.size() != 2) throw std::invalid_argument("call: shape must have two dimensions");
    *rows = shape.at(0).get<std::size_t>();
    *cols = shape.at(1).get<std::size_t>();
    const std::string family = j.at("family").get<std::string>();
    const json& o = j.at("options");
    if (family == "te_nvfp4") return {"te-nvfp4", nvfp4_call(o)};
    if (family == "ao_mx") return {"torchao-mx", mx_call(o)};
    if (family == "te_fp8block") return {"te-fp8-block", fp8_call(o, true)};
    if (family == "te_fp8tensor") return {"te-fp8-current", fp8_call(o, false)};
    throw std::invalid_argument(fmt::format(
        "call: family '{}' has no recipe row (known: te_nvfp4 ao_mx te_fp8block te_fp8tensor)", family));
  } catch (const json::exception& e) {
    throw std::invalid_argument(fmt::format("call: {}", e.what()));
  }
}

}  // namespace rpsim
