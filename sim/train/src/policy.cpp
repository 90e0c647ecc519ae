// The named precision policies, and a policy as JSON (meta.json).
#include <algorithm>

#include "rpsim/train/config_error.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/policy_ops.hpp"

namespace rpsim::sim::train {
namespace {

using namespace config_json;

// The op table's autocast classes: PyTorch's CUDA autocast lists restricted
// to the ops this simulator has.
std::vector<std::string> ops_where(bool (*keep)(const OpInfo&)) {
  std::vector<std::string> out;
  for (const auto& o : ops())
    if (keep(o)) out.emplace_back(o.name);
  return out;
}
// Function-local statics: no dependence on the order of static initialisation.
const std::vector<std::string>& autocast_allow() {
  static const auto v =
      ops_where([](const OpInfo& o) { return o.autocast == AutocastClass::lower_precision; });
  return v;
}
const std::vector<std::string>& autocast_deny() {
  static const auto v = ops_where([](const OpInfo& o) { return o.autocast == AutocastClass::fp32; });
  return v;
}
// The ops the fp8 policies run as FP8 GEMMs (Transformer Engine's modules).
const std::vector<std::string>& fp8_gemm_ops() {
  static const auto v = ops_where([](const OpInfo& o) { return o.fp8_gemm; });
  return v;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

// fill_ops (policy_ops.hpp): with autocast, allow-list ops cast to the low format,
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

namespace {

// Recursive summation in binary32 with round to nearest even: what a CPU
// float loop does (and, bit for bit, train::matmul's native float path).
sim::AccumulationModel sequential_rne(const Format& f) {
  return sim::AccumulationModel(
      sim::Sequential{sim::AccumulatorSpec{f, RoundingMode::nearest_even, 0}, false});
}

sim::AccumulationModel fp32_accumulation() {
  return sequential_rne(formats::binary32());
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
  p.autocast_allow = autocast_allow();
  p.autocast_deny = autocast_deny();
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
  for (const auto& op : fp8_gemm_ops()) {
    OpRule& r = p.ops[op];
    // Transformer Engine's HYBRID format: e4m3 forward, e5m2 gradients;
    // GEMM outputs in binary32.
    r.compute = &formats::e4m3();
    r.backward_compute = &formats::e5m2();
    r.output = &formats::binary32();
    r.scaled_inputs = true;
  }
  p.autocast_allow = fp8_gemm_ops();
  return p;
}

// A block-scaled recipe as data: element formats of the GEMM inputs
// (forward; backward = the output gradient), the scale kind (mx: E8M0 per
// block; nvfp4: E4M3 per block under a per-tensor FP32 scale), the block, and
// NVFP4's layout choices. One mechanism (layers/fp8.cpp block_quantize); a
// policy is a row of data below.
struct BlockRecipe {
  Fp8Scaling scaling;
  const char* forward;
  const char* backward;
  int block;
  bool weight_2d = false;
  int hadamard = 0;
  bool gradient_sr = false;
  int high_precision_last = 0;
};

PrecisionPolicy block_policy(const std::string& name, const BlockRecipe& b) {
  PrecisionPolicy p = fp8_policy(name, b.scaling);
  for (const auto& op : fp8_gemm_ops()) {
    OpRule& r = p.ops[op];
    r.compute = &rpsim::format(b.forward);
    r.backward_compute = &rpsim::format(b.backward);
  }
  p.fp8.block_size = b.block;
  p.fp8.weight_2d = b.weight_2d;
  p.fp8.hadamard = b.hadamard;
  p.fp8.gradient_sr = b.gradient_sr;
  p.fp8.high_precision_last = b.high_precision_last;
  return p;
}

// OCP MX v1.0's concrete formats MXFP8, MXFP6, MXFP4: blocks of 32, E8M0 scales.
// MXFP8 keeps Transformer Engine's HYBRID split (e4m3 forward, e5m2
// gradients; Micikevicius et al. 2022 "FP8 Formats for Deep Learning") as
// fp8-mx does; Mishra et al. 2025 (arXiv 2506.08027) train MXFP8 with e4m3
// everywhere and round-up scales: an override away (ops.linear.backward_compute, README).
const BlockRecipe kMxfp8{Fp8Scaling::mx, "e4m3", "e5m2", 32};
// Rouhani et al. 2023 ("Microscaling Data Formats for Deep Learning", arXiv
// 2310.10537) train GPTs with MXFP6 E3M2 in the forward and backward passes:
// E3M2's range suits gradients better than E2M3's precision.
const BlockRecipe kMxfp6{Fp8Scaling::mx, "e3m2", "e3m2", 32};
// MXFP4 (e2m1) everywhere, no other measure: the baseline NVIDIA's NVFP4
// paper compares its recipe against.
const BlockRecipe kMxfp4{Fp8Scaling::mx, "e2m1", "e2m1", 32};
// NVIDIA, "Pretraining Large Language Models with NVFP4" (arXiv 2509.25149,
// 2025): e2m1 in 1x16 blocks with E4M3 scales under a per-tensor FP32 scale
// (activations, gradients), 16x16 2D blocks for weights, a 16x16 random
// Hadamard transform on the weight-gradient GEMM's inputs, stochastic
// rounding of gradients, and a few last layers in BF16 (the paper: about 16%
// of the linear layers; here the last one, 1 of the demo GPT's 8).
const BlockRecipe kNvfp4{Fp8Scaling::nvfp4, "e2m1", "e2m1", 16, true, 16, true, 1};
// DeepSeek-V3 (arXiv 2412.19437, Sec. 3.3.2) and Transformer Engine's
// Float8BlockScaling (Megatron's --fp8-recipe blockwise): e4m3 in both passes,
// activations and gradients in 1x128 blocks along K, weights in 128x128
// tiles, a binary32 scale each (power-of-two by default, as TE's recipe:
// fp8.pow2_scales), the GEMM folding each 128-long k tile's product with its
// scales (sim gemm_blockwise).
const BlockRecipe kFp8Blockwise{Fp8Scaling::blockwise, "e4m3", "e4m3", 128, true};

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
      // sequential:binary64:rne, K in index order: the same bits on every
      // machine (Eigen's own GEMM, eigen:binary64, sums in an order that its
      // cache blocking and the build's vector ISA choose), and the trainer's
      // native binary64 kernel computes it at the speed of Eigen's or better.
      {"fp64", "every op in binary64, K summed in order (the FP64 shadow)",
       [](const std::string& n) {
         return uniform(n, formats::binary64(), sequential_rne(formats::binary64()));
       }},
      {"fp16-amp", "autocast to binary16, binary32 master weights (loss scaler by default: dynamic)",
       [](const std::string& n) { return with_scaler(autocast(n, formats::binary16(), false), "dynamic"); }},
      {"bf16-amp", "autocast to bfloat16, binary32 master weights",
       [](const std::string& n) { return autocast(n, formats::bfloat16(), false); }},
      {"fp16-pure", "binary16 everywhere, no master copy (loss scaler by default: dynamic)",
       [](const std::string& n) { return with_scaler(autocast(n, formats::binary16(), true), "dynamic"); }},
      {"bf16-pure", "bfloat16 everywhere, no master copy",
       [](const std::string& n) { return autocast(n, formats::bfloat16(), true); }},
      {"bf16-kahan", "bfloat16 everywhere with compensated updates (Zamirai et al. 2020)",
       [](const std::string& n) { return with_kahan(autocast(n, formats::bfloat16(), true)); }},
      {"fp8", "as fp8-delayed", [](const std::string& n) { return fp8_policy(n, Fp8Scaling::delayed); }},
      {"fp8-delayed", "e4m3 forward, e5m2 backward matmul inputs, delayed per-tensor scaling (TE)",
       [](const std::string& n) { return fp8_policy(n, Fp8Scaling::delayed); }},
      {"fp8-current", "FP8 matmul inputs with current per-tensor scaling",
       [](const std::string& n) { return fp8_policy(n, Fp8Scaling::current); }},
      {"fp8-mx", "FP8 matmul inputs in MX blocks of 32 with E8M0 scales (OCP MX v1.0)",
       [](const std::string& n) { return fp8_policy(n, Fp8Scaling::mx); }},
      // The block-scaled GEMMs accumulate as the fp8 rows do (binary32, K in
      // order) unless ops.*.accumulation names Blackwell's block-scaled
      // tcgen05.mma (kind::mxf8f6f4, mxf4nvf4): then the elements and their
      // block scales go into that instruction as SFA/SFB (block_gemm.cpp).
      {"mxfp8", "as fp8-mx: OCP MXFP8, e4m3 forward, e5m2 backward, blocks of 32, E8M0 scales",
       [](const std::string& n) { return block_policy(n, kMxfp8); }},
      {"mxfp6", "OCP MXFP6: e3m2 forward and backward, blocks of 32, E8M0 scales (Rouhani et al. 2023)",
       [](const std::string& n) { return block_policy(n, kMxfp6); }},
      {"mxfp4", "OCP MXFP4: e2m1 forward and backward, blocks of 32, E8M0 scales",
       [](const std::string& n) { return block_policy(n, kMxfp4); }},
      {"nvfp4",
       "NVIDIA's NVFP4 recipe (arXiv 2509.25149): e2m1, 1x16 blocks with E4M3 scales under an FP32 tensor "
       "scale, 16x16 weight blocks, 16x16 RHT on wgrad inputs, SR gradients, last linear in bf16",
       [](const std::string& n) { return block_policy(n, kNvfp4); }},
      {"fp8-blockwise",
       "FP8 block scaling (DeepSeek-V3, TE Float8BlockScaling): e4m3 forward and backward, 1x128 blocks, "
       "128x128 weight tiles, power-of-two binary32 scales folded per k tile",
       [](const std::string& n) { return block_policy(n, kFp8Blockwise); }},
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
  for (const auto& row : table())
    if (name == row.name) {
      PrecisionPolicy p = row.make(name);
      p.base = row.name;
      return p;
    }
  std::string known;
  for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("unknown policy \"" + name + "\"" + did_you_mean(name, policy_names()) +
                    " (known: " + known + ")");
}

const OpRule& PrecisionPolicy::rule(const std::string& op) const {
  const auto it = ops.find(op);
  if (it == ops.end()) throw std::invalid_argument("policy " + name + ": no rule for op " + op);
  return it->second;
}

std::span<const Fp8ScalingName> fp8_scaling_names() {
  static const Fp8ScalingName rows[] = {
      {Fp8Scaling::none, "none"}, {Fp8Scaling::delayed, "delayed"}, {Fp8Scaling::current, "current"},
      {Fp8Scaling::mx, "mx"},     {Fp8Scaling::nvfp4, "nvfp4"},     {Fp8Scaling::blockwise, "blockwise"}};
  return rows;
}

const char* mx_scale_rule_name(recipe::MxScaleRule r) {
  switch (r) {
    case recipe::MxScaleRule::floor: return "floor";
    case recipe::MxScaleRule::ceil: return "ceil";
    case recipe::MxScaleRule::even: return "even";
    case recipe::MxScaleRule::rceil: break;
  }
  return "rceil";
}

const char* nvfp4_formula_name(recipe::Nvfp4Formula f) {
  return f == recipe::Nvfp4Formula::te_2026_02 ? "te-2026-02" : "te-2026-03";
}

const char* hadamard_signs_name(Fp8Recipe::HadamardSigns s) {
  return s == Fp8Recipe::HadamardSigns::random ? "random" : "te";
}

nlohmann::json PrecisionPolicy::to_json() const {
  using nlohmann::json;
  auto fname = [](const Format* f) -> json { return f ? json(f->name) : json(); };
  json j;
  j["name"] = name;
  j["data"] = fname(data);
  j["weights"] = fname(weights);
  j["master_weights"] = fname(master_weights);
  j["gradients"] = fname(gradients);
  j["optimizer_state"] = fname(optimizer_state);
  j["optimizer_compute"] = fname(optimizer_compute);
  j["rounding"] = std::string(rounding_name(rounding));
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
    const char* scaling = "none";
    for (const auto& [s, n] : fp8_scaling_names())
      if (s == fp8.scaling) scaling = n;
    j["fp8"] = {{"scaling", scaling},
                {"amax_history_len", fp8.amax_history_len},
                {"amax_compute_algo", sim::amax_compute_algo_name(fp8.amax_compute_algo)},
                {"margin", fp8.margin},
                {"block_size", fp8.block_size}};
    if (block_scaled(fp8.scaling) && fp8.scaling != Fp8Scaling::mx) {
      // (fp8-mx's meta.json kept as it was: the extras are its defaults.)
      j["fp8"]["weight_2d"] = fp8.weight_2d;
      j["fp8"]["hadamard"] = fp8.hadamard;
      if (fp8.hadamard) j["fp8"]["hadamard_signs"] = hadamard_signs_name(fp8.hadamard_signs);
      j["fp8"]["gradient_sr"] = fp8.gradient_sr;
      j["fp8"]["high_precision_last"] = fp8.high_precision_last;
    }
    // The recipe options, where they apply (meta.json of the rows that had
    // none before keeps its keys unless an option is set).
    if (fp8.scaling == Fp8Scaling::mx && fp8.scale_rule != recipe::MxScaleRule::floor)
      j["fp8"]["scale_rule"] = mx_scale_rule_name(fp8.scale_rule);
    if (fp8.scaling == Fp8Scaling::nvfp4 && fp8.nvfp4_formula != recipe::Nvfp4Formula::te_2026_03)
      j["fp8"]["nvfp4_formula"] = nvfp4_formula_name(fp8.nvfp4_formula);
    if (fp8.scaling == Fp8Scaling::blockwise) j["fp8"]["pow2_scales"] = fp8.pow2_scales;
  }
  return j;
}

}  // namespace rpsim::sim::train
