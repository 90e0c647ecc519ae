// The named precision policies and their JSON overrides.
#include <algorithm>

#include "rpsim/train/config_error.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {
namespace {

using namespace config_json;

// PyTorch's CUDA autocast lists restricted to the ops this simulator has:
// "lower_precision_fp" ops run in the low format, "fp32" ops in binary32.
const std::vector<std::string> kAllow{"linear", "conv2d"};
const std::vector<std::string> kDeny{"layer_norm", "cross_entropy", "mse_loss"};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Builds the op table: with autocast, allow-list ops cast to the low format,
// deny-list ops to binary32, the rest follow their inputs; without it every
// op computes and outputs in `base`. Matmuls accumulate under `acc`.
void fill_ops(PrecisionPolicy& p, const Format& base, const sim::AccumulationModel& acc) {
  p.ops.clear();
  for (const auto& op : op_names()) {
    OpRule r;
    r.accumulation = acc;
    if (p.autocast_format) {
      if (contains(p.autocast_allow, op)) {
        r.compute = r.output = r.backward_compute = p.autocast_format;
      } else if (contains(p.autocast_deny, op)) {
        r.compute = r.output = r.backward_compute = &formats::binary32();
      } else {
        r.follow_inputs = true;
      }
    } else {
      r.compute = r.output = r.backward_compute = &base;
    }
    p.ops[op] = r;
  }
}

// Recursive summation in binary32 with round to nearest even: what a CPU
// float loop does (and, bit for bit, train::matmul's native float path).
sim::AccumulationModel fp32_accumulation() {
  return sim::AccumulationModel(
      sim::Sequential{sim::AccumulatorSpec{formats::binary32(), RoundingMode::nearest_even, 0}, false});
}

PrecisionPolicy uniform(const std::string& name, const Format& f, const sim::AccumulationModel& acc) {
  PrecisionPolicy p;
  p.name = name;
  p.data = p.weights = p.gradients = p.optimizer_state = p.optimizer_compute = &f;
  fill_ops(p, f, acc);
  return p;
}

PrecisionPolicy autocast(const std::string& name, const Format& low, bool pure) {
  PrecisionPolicy p;
  p.name = name;
  p.autocast_format = &low;
  p.autocast_allow = kAllow;
  p.autocast_deny = kDeny;
  const Format& f32 = formats::binary32();
  p.optimizer_compute = &f32;
  if (pure) {
    // Weights, gradients and optimizer state all in the low format; the
    // update arithmetic runs in binary32 and is rounded once on store.
    p.data = p.weights = p.gradients = p.optimizer_state = &low;
  } else {
    // Mixed precision (Micikevicius et al. 2018): binary32 master weights,
    // low-precision copies for the allow-list ops.
    p.data = &f32;
    p.weights = &low;
    p.master_weights = p.gradients = p.optimizer_state = &f32;
  }
  fill_ops(p, f32, fp32_accumulation());
  return p;
}

PrecisionPolicy fp8_policy(const std::string& name, Fp8Scaling scaling) {
  PrecisionPolicy p = uniform(name, formats::binary32(), fp32_accumulation());
  p.weights = &formats::e4m3();
  p.master_weights = &formats::binary32();
  p.fp8.scaling = scaling;
  for (const auto& op : kAllow) {
    OpRule& r = p.ops[op];
    // Transformer Engine's HYBRID format: e4m3 forward, e5m2 gradients;
    // GEMM outputs in binary32.
    r.compute = &formats::e4m3();
    r.backward_compute = &formats::e5m2();
    r.output = &formats::binary32();
    r.scaled_inputs = true;
  }
  p.autocast_allow = kAllow;
  return p;
}

// A sim accumulation model from a spec string or an object; errors name `path`.
sim::AccumulationModel accumulation_at(const nlohmann::json& j, const std::string& path) {
  if (!j.is_string() && !j.is_object())
    fail(path, "expected an accumulation model spec string (e.g. \"tc:h100:fp16:fp32\") or object, got " +
                   describe(j));
  try {
    return sim::AccumulationModel::from_json(j);
  } catch (const std::exception& e) {
    fail(path, e.what());
  }
}

const Format& format_at(const nlohmann::json& j, const std::string& path) {
  const std::string s = string(j, path);
  try {
    return format(s);
  } catch (const FormatError& e) {
    fail(path, std::string("unknown format \"") + s + "\" (" + e.what() + ")");
  }
}

std::vector<std::string> op_list(const nlohmann::json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "expected a list of op names, got " + describe(j));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const std::string op = string(j[i], p);
    if (!contains(op_names(), op)) fail(p, "unknown op \"" + op + "\"");
    out.push_back(op);
  }
  return out;
}

}  // namespace

namespace {

PrecisionPolicy with_scaler(PrecisionPolicy p, const char* scaler) {
  p.default_loss_scaler = scaler;
  return p;
}

PrecisionPolicy with_kahan(PrecisionPolicy p) {
  p.kahan = true;
  return p;
}

// The precision-policy table: one row per named policy. Names, the CLI's and
// configs' lists and error messages come from it; adding a policy is a row.
const std::vector<PolicyInfo>& table() {
  static const std::vector<PolicyInfo> rows{
      {"fp32", "every op, weight and gradient in binary32",
       [](const std::string& n) { return uniform(n, formats::binary32(), fp32_accumulation()); }},
      // Eigen's binary64 GEMM (sim's eigen:binary64): fast, and its summation
      // order (Eigen's cache blocking) is honestly named rather than modelled.
      {"fp64", "every op in binary64 under Eigen's own GEMM (the FP64 shadow)",
       [](const std::string& n) {
         return uniform(n, formats::binary64(), sim::AccumulationModel(sim::EigenGemm{}));
       }},
      {"fp16-amp", "autocast to binary16, binary32 master weights, dynamic loss scaling",
       [](const std::string& n) { return with_scaler(autocast(n, formats::binary16(), false), "dynamic"); }},
      {"bf16-amp", "autocast to bfloat16, binary32 master weights",
       [](const std::string& n) { return autocast(n, formats::bfloat16(), false); }},
      {"fp16-pure", "binary16 everywhere, no master copy, dynamic loss scaling",
       [](const std::string& n) { return with_scaler(autocast(n, formats::binary16(), true), "dynamic"); }},
      {"bf16-pure", "bfloat16 everywhere, no master copy",
       [](const std::string& n) { return autocast(n, formats::bfloat16(), true); }},
      {"bf16-kahan", "bfloat16 everywhere with compensated updates (Zamirai et al. 2020)",
       [](const std::string& n) { return with_kahan(autocast(n, formats::bfloat16(), true)); }},
      {"fp8", "as fp8-delayed",
       [](const std::string& n) { return fp8_policy(n, Fp8Scaling::delayed); }},
      {"fp8-delayed", "e4m3 forward, e5m2 backward matmul inputs, delayed per-tensor scaling (TE)",
       [](const std::string& n) { return fp8_policy(n, Fp8Scaling::delayed); }},
      {"fp8-current", "FP8 matmul inputs with current per-tensor scaling",
       [](const std::string& n) { return fp8_policy(n, Fp8Scaling::current); }},
      {"fp8-mx", "FP8 matmul inputs in MX blocks of 32 with E8M0 scales (OCP MX v1.0)",
       [](const std::string& n) { return fp8_policy(n, Fp8Scaling::mx); }},
  };
  return rows;
}

}  // namespace

std::span<const PolicyInfo> policies() {
  return table();
}

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : table()) n.emplace_back(p.name);
    return n;
  }();
  return names;
}

PrecisionPolicy named_policy(const std::string& name) {
  for (const auto& p : table())
    if (name == p.name) return p.make(name);
  std::string known;
  for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("unknown policy \"" + name + "\" (known: " + known + ")");
}

const OpRule& PrecisionPolicy::rule(const std::string& op) const {
  const auto it = ops.find(op);
  if (it == ops.end()) throw std::invalid_argument("policy " + name + ": no rule for op " + op);
  return it->second;
}

PrecisionPolicy policy_from_json(const nlohmann::json& j, const std::string& path) {
  if (j.is_string()) {
    try {
      return named_policy(j.get<std::string>());
    } catch (const ConfigError& e) {
      fail(path, e.what());
    }
  }
  check_keys(j,
             {"name", "weights", "master_weights", "gradients", "optimizer_state", "optimizer_compute",
              "update_rounding", "kahan", "autocast", "accumulation", "ops", "fp8"},
             path);
  if (!j.contains("name")) fail(join(path, "name"), "missing (a named policy to start from)");
  PrecisionPolicy p;
  try {
    p = named_policy(string(j["name"], join(path, "name")));
  } catch (const ConfigError& e) {
    fail(join(path, "name"), e.what());
  }
  p.name = p.name + "+custom";
  auto fmt_key = [&](const char* key, const Format*& field) {
    if (j.contains(key)) field = &format_at(j[key], join(path, key));
  };
  fmt_key("weights", p.weights);
  fmt_key("gradients", p.gradients);
  fmt_key("optimizer_state", p.optimizer_state);
  fmt_key("optimizer_compute", p.optimizer_compute);
  if (j.contains("master_weights")) {
    if (j["master_weights"].is_null())
      p.master_weights = nullptr;
    else
      fmt_key("master_weights", p.master_weights);
  }
  if (j.contains("update_rounding")) {
    const std::string k = join(path, "update_rounding");
    const std::string s = string(j["update_rounding"], k);
    if (s != "rne" && s != "sr") fail(k, "expected \"rne\" or \"sr\", got \"" + s + "\"");
    p.update_rounding = parse_rounding(s);
  }
  if (j.contains("kahan")) p.kahan = boolean(j["kahan"], join(path, "kahan"));
  bool rebuild = false;
  sim::AccumulationModel acc = p.ops.at("linear").accumulation;
  if (j.contains("accumulation")) {
    acc = accumulation_at(j["accumulation"], join(path, "accumulation"));
    rebuild = true;
  }
  if (j.contains("autocast")) {
    const std::string k = join(path, "autocast");
    check_keys(j["autocast"], {"format", "allow", "deny"}, k);
    const auto& a = j["autocast"];
    if (a.contains("format")) p.autocast_format = &format_at(a["format"], join(k, "format"));
    if (a.contains("allow")) p.autocast_allow = op_list(a["allow"], join(k, "allow"));
    if (a.contains("deny")) p.autocast_deny = op_list(a["deny"], join(k, "deny"));
    if (!p.autocast_format) fail(join(k, "format"), "autocast needs a low-precision format");
    rebuild = true;
  }
  if (rebuild) {
    if (p.fp8.scaling != Fp8Scaling::none)
      fail(path, "autocast and accumulation overrides are not supported for fp8 policies; use ops");
    fill_ops(p, *p.data, acc);
  }
  if (j.contains("ops")) {
    const std::string k = join(path, "ops");
    expect_object(j["ops"], k);
    for (auto it = j["ops"].begin(); it != j["ops"].end(); ++it) {
      const std::string ok = join(k, it.key());
      if (!contains(op_names(), it.key())) fail(ok, "unknown op");
      OpRule& r = p.ops[it.key()];
      if (it->is_string() && it->get<std::string>() == "follow") {
        r.follow_inputs = true;
        continue;
      }
      check_keys(*it, {"compute", "output", "backward_compute", "accumulation"}, ok);
      r.follow_inputs = false;
      if (!r.compute) r.compute = r.output = r.backward_compute = &formats::binary32();
      if (it->contains("compute"))
        r.compute = r.backward_compute = &format_at((*it)["compute"], join(ok, "compute"));
      if (it->contains("output")) r.output = &format_at((*it)["output"], join(ok, "output"));
      if (it->contains("backward_compute"))
        r.backward_compute = &format_at((*it)["backward_compute"], join(ok, "backward_compute"));
      if (it->contains("accumulation"))
        r.accumulation = accumulation_at((*it)["accumulation"], join(ok, "accumulation"));
    }
  }
  if (j.contains("fp8")) {
    const std::string k = join(path, "fp8");
    check_keys(j["fp8"], {"scaling", "amax_history_len", "amax_compute_algo", "margin", "block_size"}, k);
    const auto& f = j["fp8"];
    if (f.contains("scaling")) {
      const std::string s = string(f["scaling"], join(k, "scaling"));
      if (s == "delayed")
        p.fp8.scaling = Fp8Scaling::delayed;
      else if (s == "current")
        p.fp8.scaling = Fp8Scaling::current;
      else if (s == "mx")
        p.fp8.scaling = Fp8Scaling::mx;
      else
        fail(join(k, "scaling"), "expected delayed, current or mx, got \"" + s + "\"");
    }
    if (f.contains("amax_history_len")) {
      p.fp8.amax_history_len = int(integer(f["amax_history_len"], join(k, "amax_history_len")));
      if (p.fp8.amax_history_len < 1) fail(join(k, "amax_history_len"), "must be at least 1");
    }
    if (f.contains("amax_compute_algo")) {
      p.fp8.amax_compute_algo = string(f["amax_compute_algo"], join(k, "amax_compute_algo"));
      if (p.fp8.amax_compute_algo != "max" && p.fp8.amax_compute_algo != "most_recent")
        fail(join(k, "amax_compute_algo"), "expected \"max\" or \"most_recent\"");
    }
    if (f.contains("margin")) p.fp8.margin = int(integer(f["margin"], join(k, "margin")));
    if (f.contains("block_size")) {
      p.fp8.block_size = int(integer(f["block_size"], join(k, "block_size")));
      if (p.fp8.block_size < 1) fail(join(k, "block_size"), "must be positive");
    }
  }
  return p;
}

nlohmann::json PrecisionPolicy::to_json() const {
  auto fname = [](const Format* f) -> nlohmann::json {
    return f ? nlohmann::json(f->name) : nlohmann::json();
  };
  nlohmann::json j;
  j["name"] = name;
  j["data"] = fname(data);
  j["weights"] = fname(weights);
  j["master_weights"] = fname(master_weights);
  j["gradients"] = fname(gradients);
  j["optimizer_state"] = fname(optimizer_state);
  j["optimizer_compute"] = fname(optimizer_compute);
  j["update_rounding"] = std::string(rounding_name(update_rounding));
  j["kahan"] = kahan;
  j["autocast"] = {{"format", fname(autocast_format)}, {"allow", autocast_allow}, {"deny", autocast_deny}};
  for (const auto& [op, r] : ops) {
    if (r.follow_inputs) {
      j["ops"][op] = "follow";
      continue;
    }
    j["ops"][op] = {{"compute", fname(r.compute)},
                    {"output", fname(r.output)},
                    {"backward_compute", fname(r.backward_compute)},
                    {"accumulation", r.accumulation.spec()},
                    {"scaled_inputs", r.scaled_inputs}};
  }
  if (fp8.scaling != Fp8Scaling::none) {
    static const char* names[] = {"none", "delayed", "current", "mx"};
    j["fp8"] = {{"scaling", names[int(fp8.scaling)]},
                {"amax_history_len", fp8.amax_history_len},
                {"amax_compute_algo", fp8.amax_compute_algo},
                {"margin", fp8.margin},
                {"block_size", fp8.block_size}};
  }
  return j;
}

}  // namespace rpsim::sim::train
