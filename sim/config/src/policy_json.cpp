// A precision policy from JSON (a name, or a named policy plus overrides);
// back to JSON: PrecisionPolicy::to_json (sim/train policy.cpp). Each object's keys are a table: names, the
// unknown-key check and the reading come from it.
#include <fmt/format.h>

#include <algorithm>
#include <span>

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

// One key of a policy object: its name and how it sets a T.
template <class T>
struct Row {
  const char* name;
  void (*read)(const json& value, const std::string& path, T& target);
};

template <class T>
std::vector<std::string> row_names(std::span<const Row<T>> rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.emplace_back(r.name);
  return out;
}

// Rows in table order (so a later row can refine an earlier one).
template <class T>
void read_rows(const json& j, std::span<const Row<T>> rows, const std::string& path, T& target) {
  for (const auto& r : rows)
    if (j.contains(r.name)) r.read(j[r.name], join(path, r.name), target);
}

// A sim accumulation model from a spec string or an object; errors name `path`.
sim::AccumulationModel accumulation_at(const json& j, const std::string& path) {
  if (!j.is_string() && !j.is_object())
    fail(path, "expected an accumulation model spec string (e.g. \"tc:h100:fp16:fp32\") or object, got " +
                   describe(j));
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
    {"format",
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.autocast_format = &format_at(v, p); }},
    {"allow", [](const json& v, const std::string& p, PolicyRead& r) { r.p.autocast_allow = op_list(v, p); }},
    {"deny", [](const json& v, const std::string& p, PolicyRead& r) { r.p.autocast_deny = op_list(v, p); }},
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
    {"weights", [](const json& v, const std::string& p, PolicyRead& r) { r.p.weights = &format_at(v, p); }},
    {"master_weights", [](const json& v, const std::string& p,
                          PolicyRead& r) { r.p.master_weights = v.is_null() ? nullptr : &format_at(v, p); }},
    {"gradients",
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.gradients = &format_at(v, p); }},
    {"optimizer_state",
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.optimizer_state = &format_at(v, p); }},
    {"optimizer_compute",
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.optimizer_compute = &format_at(v, p); }},
    {"rounding", [](const json& v, const std::string& p, PolicyRead& r) { r.p.rounding = rne_or_sr(v, p); }},
    {"update_rounding",
     [](const json& v, const std::string& p, PolicyRead& r) { r.p.update_rounding = rne_or_sr(v, p); }},
    {"kahan", [](const json& v, const std::string& p, PolicyRead& r) { r.p.kahan = boolean(v, p); }},
    {"accumulation",
     [](const json& v, const std::string& p, PolicyRead& r) {
       r.acc = accumulation_at(v, p);
       r.rebuild = true;
     }},
    {"autocast", read_autocast},
};

// Applied in this order: `compute` sets the backward inputs too, unless
// `backward_compute` (after it) says otherwise.
const Row<OpRule> kRule[] = {
    {"compute", [](const json& v, const std::string& p,
                   OpRule& r) { r.compute = r.backward_compute = &format_at(v, p); }},
    {"output", [](const json& v, const std::string& p, OpRule& r) { r.output = &format_at(v, p); }},
    {"backward_compute",
     [](const json& v, const std::string& p, OpRule& r) { r.backward_compute = &format_at(v, p); }},
    {"accumulation",
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

const Row<Fp8Recipe> kFp8[] = {
    {"scaling",
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
    {"amax_history_len",
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.amax_history_len = int(integer(v, p));
       if (f.amax_history_len < 1) fail(p, "must be at least 1");
     }},
    {"amax_compute_algo",
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       const auto algo = sim::parse_amax_compute_algo(string(v, p));
       if (!algo) fail(p, "expected \"max\" or \"most_recent\"");
       f.amax_compute_algo = *algo;
     }},
    {"margin", [](const json& v, const std::string& p, Fp8Recipe& f) { f.margin = int(integer(v, p)); }},
    {"block_size",
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.block_size = int(integer(v, p));
       if (f.block_size < 1) fail(p, "must be positive");
     }},
    {"weight_2d", [](const json& v, const std::string& p, Fp8Recipe& f) { f.weight_2d = boolean(v, p); }},
    {"hadamard",
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.hadamard = int(integer(v, p));
       if (f.hadamard < 0 || (f.hadamard & (f.hadamard - 1)) != 0)
         fail(p, "must be 0 (off) or a power of two");
     }},
    {"gradient_sr", [](const json& v, const std::string& p, Fp8Recipe& f) { f.gradient_sr = boolean(v, p); }},
    {"high_precision_last",
     [](const json& v, const std::string& p, Fp8Recipe& f) {
       f.high_precision_last = int(integer(v, p));
       if (f.high_precision_last < 0) fail(p, "must be at least 0");
     }},
};

// Applied once the op table is built.
const Row<PolicyRead> kOpTable[] = {
    {"ops", read_ops},
    {"fp8",
     [](const json& v, const std::string& p, PolicyRead& r) {
       expect_object(v, p);
       read_rows<Fp8Recipe>(v, kFp8, p, r.p.fp8);
     }},
};

std::vector<std::string> policy_keys() {
  std::vector<std::string> keys{"name"};
  for (const auto& n : row_names<PolicyRead>(kSettings)) keys.push_back(n);
  for (const auto& n : row_names<PolicyRead>(kOpTable)) keys.push_back(n);
  return keys;
}

}  // namespace

void check_policy_keys(const json& j, const std::string& path, KeyReport& report) {
  if (!check_object_keys(j, policy_keys(), path, report)) return;
  if (j.contains("autocast") && j["autocast"].is_object())
    check_object_keys(j["autocast"], row_names<PolicyRead>(kAutocast), join(path, "autocast"), report);
  if (j.contains("fp8") && j["fp8"].is_object())
    check_object_keys(j["fp8"], row_names<Fp8Recipe>(kFp8), join(path, "fp8"), report);
  if (!j.contains("ops") || !j["ops"].is_object()) return;
  const std::string ops = join(path, "ops");
  check_object_keys(j["ops"], op_names(), ops, report);
  for (auto it = j["ops"].begin(); it != j["ops"].end(); ++it)
    if (it->is_object()) check_object_keys(*it, row_names<OpRule>(kRule), join(ops, it.key()), report);
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
