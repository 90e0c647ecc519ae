// The gpt row of the model table: a GPT-2-style decoder as nanoGPT writes
// it (Karpathy, nanoGPT model.py), without dropout.
#include <fmt/format.h>

#include <cmath>

#include "rpsim/formats/random.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/model.hpp"

namespace rpsim::sim::train {
namespace {

using Layers = std::vector<std::unique_ptr<Layer>>;

// ln_1, c_attn (q, k, v), attention, c_proj: the attention half of a block.
std::unique_ptr<Layer> attention_block(const std::string& h, const ModelConfig& c) {
  Layers body;
  body.push_back(std::make_unique<LayerNorm>(h + ".ln_1", c.n_embd));
  body.push_back(std::make_unique<Linear>(h + ".attn.c_attn", c.n_embd, 3 * c.n_embd));
  body.push_back(std::make_unique<CausalSelfAttention>(h + ".attn", c.block_size, c.n_head));
  body.push_back(std::make_unique<Linear>(h + ".attn.c_proj", c.n_embd, c.n_embd));
  return std::make_unique<Residual>(h + "_attn", std::move(body));
}

// ln_2, c_fc (4x wider), GELU, c_proj: the MLP half of a block.
std::unique_ptr<Layer> mlp_block(const std::string& h, const ModelConfig& c) {
  Layers body;
  body.push_back(std::make_unique<LayerNorm>(h + ".ln_2", c.n_embd));
  body.push_back(std::make_unique<Linear>(h + ".mlp.c_fc", c.n_embd, 4 * c.n_embd));
  body.push_back(std::make_unique<GELU>(h + ".mlp.gelu"));
  body.push_back(std::make_unique<Linear>(h + ".mlp.c_proj", 4 * c.n_embd, c.n_embd));
  return std::make_unique<Residual>(h + "_mlp", std::move(body));
}

// N(0, std^2) by Box-Muller on counter_random, rounded to `fmt`.
void init_normal(Matrix& m, double std, std::uint64_t seed, std::uint64_t stream, const Format& fmt) {
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double u1 = (double(counter_random(seed, stream, 2 * std::uint64_t(i)) >> 11) + 1) * 0x1.0p-53;
    const double u2 = double(counter_random(seed, stream, 2 * std::uint64_t(i) + 1) >> 11) * 0x1.0p-53;
    m.data()[i] = std * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }
  round_in_place(fmt, m);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

// gpt_size has checked the config against the data.
Layers gpt_layers(const ModelConfig& c, const Dataset& data) {
  Layers out;
  out.push_back(std::make_unique<Embedding>("wte", data.classes, c.block_size, c.n_embd));
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string index = std::to_string(i), h = "h" + index;
    out.push_back(attention_block(h, c));
    out.push_back(mlp_block(h, c));
  }
  out.push_back(std::make_unique<LayerNorm>("ln_f", c.n_embd));
  out.push_back(std::make_unique<LMHead>("lm_head", "wte"));
  return out;
}

// nanoGPT's _init_weights: every Linear weight and both embeddings
// N(0, 0.02^2), the residual projections (c_proj) N(0, (0.02 / sqrt(2
// n_layer))^2), biases 0, LayerNorm gain 1 and bias 0. Weight decay applies
// to the matrices only (nanoGPT's configure_optimizers: params with dim >= 2).
void gpt_init(Model& model, const ModelConfig& c, std::uint64_t seed, const Format& storage) {
  std::uint64_t stream = 1;
  for (Parameter* p : model.parameters()) {
    const bool norm = p->name.find(".ln_") != std::string::npos || p->name.rfind("ln_f.", 0) == 0;
    if (norm || ends_with(p->name, ".bias")) {
      p->decay = false;
      round_in_place(storage, p->value);  // already 1 or 0
      continue;
    }
    const double std = ends_with(p->name, "c_proj.weight") ? 0.02 / std::sqrt(2.0 * c.n_layer) : 0.02;
    init_normal(p->value, std, seed, stream++, storage);
  }
}

// nanoGPT's sizes: the embeddings (V C + T C), per block two LayerNorms,
// c_attn, the attention's c_proj, c_fc and the MLP's c_proj (12 C^2 + 13 C),
// the final LayerNorm; the head is tied to wte. Saved per window: per block
// about 16 T C values (LayerNorms, q k v, the 4x MLP, residuals) and the
// attention's scores and probabilities, 2 H T^2; the logits and their
// softmax, 2 T V. Multiply-adds per window: each token through the block's
// four Linears (12 C^2), per head q k^T and p v over all T x T pairs (the
// causal mask is applied after the product: 2 T^2 C in all) and the head
// (T C V).
ModelSize gpt_size(const ModelConfig& c, const Dataset& data) {
  if (c.n_embd % c.n_head != 0)
    throw ConfigError("model.n_embd: " + std::to_string(c.n_embd) + " is not a multiple of model.n_head (" +
                      std::to_string(c.n_head) + ")");
  if (data.context != c.block_size)
    throw ConfigError("model.block_size: the data's windows hold " + std::to_string(data.context) +
                      " tokens");
  const double v = data.classes, t = c.block_size, e = c.n_embd, l = c.n_layer, h = c.n_head;
  ModelSize s;
  s.parameters = v * e + t * e + l * (12 * e * e + 13 * e) + 2 * e;
  s.activations_per_sample = l * (16 * t * e + 2 * h * t * t) + 2 * t * v + 2 * t * e;
  s.forward_multiply_adds = l * (12 * t * e * e + 2 * t * t * e) + t * e * v;
  return s;
}

std::string gpt_describe(const ModelConfig& c) {
  return fmt::format("gpt (nanoGPT decoder): {} blocks of width {}, {} heads, {} tokens per window",
                     c.n_layer, c.n_embd, c.n_head, c.block_size);
}

}  // namespace rpsim::sim::train
