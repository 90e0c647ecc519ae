// A precision policy from JSON (a name, or a named policy plus overrides);
// back to JSON: PrecisionPolicy::to_json (sim/train policy.cpp). Each object's keys are a table: names, the
// unknown-key check and the reading come from it.
#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "config_values.hpp"
#include "policy_read.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/policy_ops.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

// One key of a policy object: its row (name, type, help) and how it sets a T.
template <class T>
struct Row {
  KeySpec key;
  void (*read)(const json& value, const std::string& path, T& target);
};

template <class T>
std::vector<KeySpec> specs(std::span<const Row<T>> rows) {
  return key_specs(rows);
}

// Rows in table order (so a later row can refine an earlier one).
template <class T>
void read_rows(const json& j, std::span<const Row<T>> rows, const std::string& path, T& target) {
  for (const auto& r : rows)
    if (j.contains(r.key.name)) r.read(j[r.key.name], join(path, r.key.name), target);
}

using K = KeyType;

// A sim accumulation model from a spec string or an object; errors name `path`.
sim::AccumulationModel accumulation_at(const json& j, const std::string& path) {
  try {
    return sim::AccumulationModel::from_json(j);
  } catch (const std::exception& e) {
    fail(path, e.what());
  }
}

const Format& format_at(const json& j, const std::string& path) {
  const std::string s = string(j, path);
  try {
    return format(s);
  } catch (const FormatError& e) {
    fail(path, std::string("unknown format \"") + s + "\" (" + e.what() + ")");
  }
}

std::vector<std::string> op_list(const json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "expected a list of op names, got " + describe(j));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const std::string op = string(j[i], p);
    if (std::find(op_names().begin(), op_names().end(), op) == op_names().end())
      fail(p, "unknown op \"" + op + "\"" + did_you_mean(op, op_names()));
    out.push_back(op);
  }
  return out;
}

// A policy being read: the op table is rebuilt once, after the keys it is
// built from (autocast, accumulation) and before the per-op overrides.
struct PolicyRead {
  PrecisionPolicy p;
  sim::AccumulationModel acc;
  bool rebuild = false;
};

const Row<PolicyRead> kAutocast[] = {
    {{"format", K::text, "the low-precision format of autocast ops"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.autocast_format = &format_at(v, p); }},
    {{"allow", K::texts, "ops autocast runs in the low format"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.autocast_allow = op_list(v, p); }},
    {{"deny", K::texts, "ops autocast keeps in binary32"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.autocast_deny = op_list(v, p); }},
};

void read_autocast(const json& a, const std::string& path, PolicyRead& r) {
  expect_object(a, path);
  read_rows<PolicyRead>(a, kAutocast, path, r);
  if (!r.p.autocast_format) fail(join(path, "format"), "autocast needs a low-precision format");
  r.rebuild = true;
}

// "rne" or "sr": the two modes a training framework offers.
RoundingMode rne_or_sr(const json& v, const std::string& path) {
  const std::string s = string(v, path);
  if (s != "rne" && s != "sr") fail(path, "expected \"rne\" or \"sr\", got \"" + s + "\"");
  return parse_rounding(s);
}

const Row<PolicyRead> kSettings[] = {
    {{"weights", K::text, "the format weights are stored in"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.weights = &format_at(v, p); }},
    {{"master_weights", K::text_or_null, "the master copy's format (null: none)"},
     [](const json& v, const std::string& p, PolicyRead& r) {
       r.p.master_weights = v.is_null() ? nullptr : &format_at(v, p);
     }},
    {{"gradients", K::text, "the format gradients are stored in"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.gradients = &format_at(v, p); }},
    {{"optimizer_state", K::text, "the format of the optimizer's state"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.optimizer_state = &format_at(v, p); }},
    {{"optimizer_compute", K::text, "the format the update is computed in"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.optimizer_compute = &format_at(v, p); }},
    {{"rounding", K::text, "rne or sr"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.rounding = rne_or_sr(v, p); }},
    {{"update_rounding", K::text, "rne or sr, for the weight update"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.update_rounding = rne_or_sr(v, p); }},
    {{"kahan", K::flag, "Kahan-compensated weight update"},
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.kahan = boolean(v, p); }},
    {{"accumulation", K::accumulation, "every GEMM's accumulation model"},
     [](const json& v, const std::string& p, PolicyRead& r) {
       r.acc = accumulation_at(v, p);
       r.rebuild = true;
     }},
    {{"autocast", K::object, "autocast: format, allow, deny"}, read_autocast},
};

// Applied in this order: `compute` sets the backward inputs too, unless
// `backward_compute` (after it) says otherwise.
const Row<OpRule> kRule[] = {
    {{"compute", K::text, "the op's input format (and backward's, unless given)"},
     [](const json& v, const std::string& p, OpRule& r) {
       r.compute = r.backward_compute = &format_at(v, p);
     }},
    {{"output", K::text, "the op's output format"},
     [](const json& v, const std::string& p, OpRule& r) { r.output = &format_at(v, p); }},
    {{"backward_compute", K::text, "the backward pass's input format"},
     [](const json& v, const std::string& p, OpRule& r) { r.backward_compute = &format_at(v, p); }},
    {{"accumulation", K::accumulation, "the op's accumulation model"},
     [](const json& v, const std::string& p, OpRule& r) { r.accumulation = accumulation_at(v, p); }},
};

void read_ops(const json& ops, const std::string& path, PolicyRead& r) {
  expect_object(ops, path);
  for (auto it = ops.begin(); it != ops.end(); ++it) {
    OpRule& rule = r.p.ops[it.key()];
    if (it->is_string() && it->get<std::string>() == "follow") {
      rule.follow_inputs = true;
      continue;
    }
    const std::string p = join(path, it.key());
    expect_object(*it, p);
    rule.follow_inputs = false;
    if (!rule.compute) rule.compute = rule.output = rule.backward_compute = &formats::binary32();
    read_rows<OpRule>(*it, kRule, p, rule);
  }
}

// A recipe option read by name, for the one scaling it applies to.
template <class E>
E named_option(const json& v, const std::string& path, const Fp8Recipe& f, Fp8Scaling applies,
               const char* (*name)(E), std::initializer_list<E> values) {
  const char* scaling = "";
  for (const auto& [s, n] : fp8_scaling_names())
    if (s == applies) scaling = n;
  if (f.scaling != applies) fail(path, fmt::format("applies to the {} scaling only", scaling));
  const std::string s = string(v, path);
  std::string known;
  for (E e : values) {
    if (s == name(e)) return e;
    known += (known.empty() ? "" : ", ") + std::string(name(e));
  }
  fail(path, "expected one of " + known + ", got \"" + s + "\"");
}

const Row<Fp8Recipe> kFp8[] = {
    {{"scaling", K::text, "delayed, current, block, ... (the FP8 scaling table)"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       const std::string s = string(v, p);
       std::string known;
       for (const auto& [scaling, name] : fp8_scaling_names()) {
         if (scaling == Fp8Scaling::none) continue;
         if (s == name) return void(f.scaling = scaling);
         known += (known.empty() ? "" : ", ") + std::string(name);
       }
       fail(p, "expected one of " + known + ", got \"" + s + "\"");
     }},
    {{"amax_history_len", K::integer, "amax history length (Transformer Engine)"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.amax_history_len = size_at(v, p);  // a history per tensor: 2^20 values at most
     }},
    {{"amax_compute_algo", K::text, "max or most_recent"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       const auto algo = sim::parse_amax_compute_algo(string(v, p));
       if (!algo) fail(p, "expected \"max\" or \"most_recent\"");
       f.amax_compute_algo = *algo;
     }},
    {{"margin", K::integer, "the scale's margin in powers of two"},
     [](const json& v, const std::string& p, Fp8Recipe& f) { f.margin = int_in(v, p, -1074, 1023); }},
    {{"block_size", K::integer, "block scaling: elements per scale"},
     [](const json& v, const std::string& p, Fp8Recipe& f) { f.block_size = size_at(v, p); }},
    {{"weight_2d", K::flag, "block scaling: 2-D weight blocks"},
     [](const json& v, const std::string& p, Fp8Recipe& f) { f.weight_2d = boolean(v, p); }},
    {{"hadamard", K::integer, "random Hadamard transform size (0: off)"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.hadamard = int_in(v, p, 0, 1 << 20);
       if ((f.hadamard & (f.hadamard - 1)) != 0) fail(p, "must be 0 (off) or a power of two");
     }},
    {{"hadamard_signs", K::text,
      "the transform's signs: te (TE's fixed vector, 16) or random (the run's seed)"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       using S = Fp8Recipe::HadamardSigns;
       f.hadamard_signs = named_option(v, p, f, f.scaling, hadamard_signs_name, {S::te, S::random});
     }},
    {{"gradient_sr", K::flag, "stochastic rounding of gradients"},
     [](const json& v, const std::string& p, Fp8Recipe& f) { f.gradient_sr = boolean(v, p); }},
    {{"high_precision_last", K::integer, "last N layers kept in high precision"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.high_precision_last = int_in(v, p, 0, 1 << 20);
     }},
    {{"scale_rule", K::text, "mx: E8M0 scale rule floor (OCP), rceil, ceil or even (torchao)"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.scale_rule = named_option(v, p, f, Fp8Scaling::mx, mx_scale_rule_name,
                                   {recipe::MxScaleRule::floor, recipe::MxScaleRule::rceil,
                                    recipe::MxScaleRule::ceil, recipe::MxScaleRule::even});
     }},
    {{"nvfp4_formula", K::text, "nvfp4: TE's block-scale formula te-2026-03 or te-2026-02"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.nvfp4_formula = named_option(v, p, f, Fp8Scaling::nvfp4, nvfp4_formula_name,
                                      {recipe::Nvfp4Formula::te_2026_03, recipe::Nvfp4Formula::te_2026_02});
     }},
    {{"pow2_scales", K::flag, "blockwise: power-of-two scales (false: binary32 max / amax)"},
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       if (f.scaling != Fp8Scaling::blockwise)
         fail(p, "applies to the blockwise scaling (fp8-blockwise) only");
       f.pow2_scales = boolean(v, p);
     }},
};

// Applied once the op table is built.
const Row<PolicyRead> kOpTable[] = {
    {{"ops", K::object, "per-op overrides: {op: {compute, output, ...} | \"follow\"}"}, read_ops},
    {{"fp8", K::object, "the FP8 recipe"},
     [](const json& v, const std::string& p, PolicyRead& r) {
       expect_object(v, p);
       read_rows<Fp8Recipe>(v, kFp8, p, r.p.fp8);
       const Fp8Recipe& f = r.p.fp8;
       if (f.hadamard && f.hadamard != 16 && f.hadamard_signs == Fp8Recipe::HadamardSigns::te)
         fail(join(p, "hadamard"), fmt::format("{}: TE's sign vector has 16 entries; set hadamard_signs "
                                               "\"random\" for another size",
                                               f.hadamard));
     }},
};

std::vector<KeySpec> policy_keys() {
  std::vector<KeySpec> keys{{"name", K::text, "the named policy this one starts from"}};
  for (const auto& k : specs<PolicyRead>(kSettings)) keys.push_back(k);
  for (const auto& k : specs<PolicyRead>(kOpTable)) keys.push_back(k);
  return keys;
}

// An op's entry in "ops": "follow" (its inputs' formats) or a rule.
const KeySpec kOpEntry{"", K::text_or_object,
                       "\"follow\" or {compute, output, backward_compute, accumulation}"};

}  // namespace

void check_policy_keys(const json& j, const std::string& path, KeyReport& report) {
  if (!check_keys(j, policy_keys(), path, report)) return;
  if (j.contains("autocast") && j["autocast"].is_object())
    check_keys(j["autocast"], specs<PolicyRead>(kAutocast), join(path, "autocast"), report);
  if (j.contains("fp8") && j["fp8"].is_object())
    check_keys(j["fp8"], specs<Fp8Recipe>(kFp8), join(path, "fp8"), report);
  if (!j.contains("ops") || !j["ops"].is_object()) return;
  // The op table's names are the keys of "ops", each with the same row.
  const std::string ops = join(path, "ops");
  std::vector<KeySpec> entries;
  for (const auto& op : op_names()) entries.push_back({op.c_str(), kOpEntry.type, kOpEntry.help});
  check_keys(j["ops"], entries, ops, report);
  for (auto it = j["ops"].begin(); it != j["ops"].end(); ++it)
    if (it->is_object()) check_keys(*it, specs<OpRule>(kRule), join(ops, it.key()), report);
}

std::vector<KeyHelp> policy_key_help() {
  std::vector<KeyHelp> out;
  const auto add = [&out](const std::string& path, const std::vector<KeySpec>& keys) {
    for (const KeySpec& k : keys) out.push_back({join(path, k.name), type_phrase(k.type), k.help});
  };
  add("policy", policy_keys());
  add("policy.autocast", specs<PolicyRead>(kAutocast));
  add("policy.ops", {{"OP", kOpEntry.type, kOpEntry.help}});
  add("policy.ops.OP", specs<OpRule>(kRule));
  add("policy.fp8", specs<Fp8Recipe>(kFp8));
  return out;
}

PrecisionPolicy policy_from_json(const json& j, const std::string& path) {
  if (j.is_string()) {
    try {
      return named_policy(j.get<std::string>());
    } catch (const ConfigError& e) {
      fail(path, e.what());
    }
  }
  KeyReport report;
  check_policy_keys(j, path, report);
  report.throw_if_any();
  return read_checked_policy(j, path);
}

PrecisionPolicy read_checked_policy(const json& j, const std::string& path) {
  if (j.is_string()) return policy_from_json(j, path);
  expect_object(j, path);
  if (!j.contains("name")) fail(join(path, "name"), "missing (a named policy to start from)");
  PolicyRead r;
  try {
    r.p = named_policy(string(j["name"], join(path, "name")));
  } catch (const ConfigError& e) {
    fail(join(path, "name"), e.what());
  }
  r.p.name += "+custom";
  r.acc = r.p.ops.at("linear").accumulation;
  read_rows<PolicyRead>(j, kSettings, path, r);
  if (r.rebuild) {
    if (r.p.fp8.scaling != Fp8Scaling::none)
      fail(path, "autocast and accumulation overrides are not supported for fp8 policies; use ops");
    fill_ops(r.p, *r.p.data, r.acc);
  }
  read_rows<PolicyRead>(j, kOpTable, path, r);
  check_block_instructions(r.p, path);
  return r.p;
}

}  // namespace rpsim::sim::config
