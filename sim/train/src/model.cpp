// The model table: mlp, cnn, gpt (gpt.cpp) and a list of op-table layers.
#include "rpsim/train/model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "rpsim/formats/random.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/run_config.hpp"

namespace rpsim::sim::train {
namespace {

using Layers = std::vector<std::unique_ptr<Layer>>;

void init_uniform(Matrix& m, double bound, std::uint64_t seed, std::uint64_t stream, const Format& fmt) {
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double u = double(counter_random(seed, stream, std::uint64_t(i)) >> 11) * 0x1.0p-53;
    m.data()[i] = (2 * u - 1) * bound;
  }
  round_in_place(fmt, m);
}

// torch.nn.Linear / Conv2d default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
// for weight and bias, one random stream per tensor in layer order.
void torch_default_init(Model& m, const ModelConfig&, std::uint64_t seed, const Format& storage) {
  std::uint64_t stream = 1;
  for (auto& l : m.layers)
    if (auto* lin = dynamic_cast<Linear*>(l.get())) {
      const double bound = 1.0 / std::sqrt(double(lin->weight.value.rows()));
      init_uniform(lin->weight.value, bound, seed, stream++, storage);
      init_uniform(lin->bias.value, bound, seed, stream++, storage);
    }
}

std::unique_ptr<Layer> activation(const ModelConfig& mc, const std::string& name) {
  if (mc.activation == "gelu") return std::make_unique<GELU>(name);
  return std::make_unique<ReLU>(name);
}

// Hidden Linear (+ LayerNorm) + activation per width, then the classifier.
void add_mlp(Layers& out, const ModelConfig& mc, const std::vector<int>& hidden, Eigen::Index width,
             int classes) {
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    const std::string n = std::to_string(i);
    out.push_back(std::make_unique<Linear>("fc" + n, width, hidden[i]));
    if (mc.layer_norm) out.push_back(std::make_unique<LayerNorm>("ln" + n, hidden[i]));
    out.push_back(activation(mc, "act" + n));
    width = hidden[i];
  }
  out.push_back(std::make_unique<Linear>("fc" + std::to_string(hidden.size()), width, classes));
}

Layers mlp_layers(const ModelConfig& mc, const Dataset& data) {
  Layers out;
  add_mlp(out, mc, mc.hidden, data.features(), data.classes);
  return out;
}

// conv(3x3, pad 1) + activation + maxpool(2) per channel count, then a
// Linear (cnn_size has checked that every stage keeps a pixel).
Layers cnn_layers(const ModelConfig& mc, const Dataset& data) {
  Layers out;
  int c = data.channels, h = data.height, w = data.width;
  for (std::size_t i = 0; i < mc.channels.size(); ++i) {
    const std::string n = std::to_string(i);
    out.push_back(std::make_unique<Conv2d>("conv" + n, c, mc.channels[i], h, w, 3, 1));
    out.push_back(activation(mc, "act_conv" + n));
    out.push_back(std::make_unique<MaxPool2d>("pool" + n, mc.channels[i], h, w, 2));
    c = mc.channels[i];
    h /= 2;
    w /= 2;
  }
  add_mlp(out, mc, {}, Eigen::Index(c) * h * w, data.classes);
  return out;
}

// Each entry of a "layers" model checked against the op table, with the
// shape it receives; the last must give the data's classes. Sizing and
// building walk the list alike (the size row never makes a tensor).
template <class Each>
void each_listed_layer(const ModelConfig& mc, const Dataset& data, Each each) {
  using namespace config_json;
  LayerShape shape{data.features(), data.channels, data.height, data.width};
  if (!mc.layers.is_array() || mc.layers.empty()) fail("model.layers", "expected a non-empty list of layers");
  for (std::size_t i = 0; i < mc.layers.size(); ++i) {
    const std::string path = "model.layers[" + std::to_string(i) + "]";
    const auto& entry = mc.layers[i];
    expect_object(entry, path);
    if (!entry.contains("op")) fail(join(path, "op"), "missing");
    const std::string op = string(entry["op"], join(path, "op"));
    const OpInfo* info = find_op(op);
    if (!info || !info->layer || !info->size)
      fail(join(path, "op"), "\"" + op + "\" is not a layer (layers: " + op_list([](const OpInfo& o) {
                               return o.layer != nullptr;
                             }) + ")");
    each(*info, op + std::to_string(i), entry, path, shape);
  }
  if (shape.features != data.classes)
    fail("model.layers", "the last layer gives " + std::to_string(shape.features) +
                             " features, the data has " + std::to_string(data.classes) + " classes");
}

// Any stack of op-table layers: {"op": NAME, args...} per entry.
Layers listed_layers(const ModelConfig& mc, const Dataset& data) {
  Layers out;
  each_listed_layer(
      mc, data,
      [&](const OpInfo& info, const std::string& name, const nlohmann::json& entry, const std::string& path,
          LayerShape& shape) { out.push_back(info.layer(name, entry, path, shape)); });
  return out;
}

// The op table's size column, entry by entry, from the input's features on.
ModelSize listed_size(const ModelConfig& mc, const Dataset& data) {
  ModelSize s;
  s.activations_per_sample = double(data.features());
  each_listed_layer(mc, data,
                    [&](const OpInfo& info, const std::string&, const nlohmann::json& entry,
                        const std::string& path, LayerShape& shape) {
                      const LayerSize z = info.size(entry, path, shape);
                      s.parameters += z.parameters;
                      s.activations_per_sample += z.activations_per_sample;
                      s.forward_multiply_adds += z.multiply_adds;
                    });
  return s;
}

// Per sample each Linear keeps its input and output, LayerNorm and the
// activation their outputs (the layers' forward caches); each Linear does
// in x out multiply-adds.
ModelSize mlp_size(const ModelConfig& mc, const Dataset& data) {
  ModelSize s;
  double width = data.features();
  s.activations_per_sample = width;
  for (int h : mc.hidden) {
    s.parameters += (width + 1) * h + (mc.layer_norm ? 2.0 * h : 0);
    s.activations_per_sample += double(h) * (mc.layer_norm ? 4 : 2);
    s.forward_multiply_adds += width * h;
    width = h;
  }
  s.parameters += (width + 1) * data.classes;
  s.activations_per_sample += 2.0 * data.classes;
  s.forward_multiply_adds += width * data.classes;
  return s;
}

// Per stage: the convolution's output, the activation's and the pooled one;
// each output pixel of a 3x3 convolution is a dot product of c * 9 terms.
ModelSize cnn_size(const ModelConfig& mc, const Dataset& data) {
  ModelSize s;
  double c = data.channels, h = data.height, w = data.width;
  s.activations_per_sample = c * h * w;
  for (int ch : mc.channels) {
    if (h < 2 || w < 2)
      throw ConfigError("model.channels: too many pooling stages for " + std::to_string(data.height) + "x" +
                        std::to_string(data.width) + " images");
    s.parameters += (c * 9 + 1) * ch;
    s.activations_per_sample += 2.0 * ch * h * w + ch * std::floor(h / 2) * std::floor(w / 2);
    s.forward_multiply_adds += c * 9 * ch * h * w;
    c = ch;
    h = std::floor(h / 2);
    w = std::floor(w / 2);
  }
  s.parameters += (c * h * w + 1) * data.classes;
  s.forward_multiply_adds += c * h * w * data.classes;
  return s;
}

// The rows' descriptions for the run plan (the mlp and cnn lines name
// Fashion-MNIST's 784 inputs and 10 classes, as they always have).
std::string mlp_describe(const ModelConfig& m) {
  return fmt::format("mlp 784-{}-10, {}{}", fmt::join(m.hidden, "-"), m.activation,
                     m.layer_norm ? ", LayerNorm" : "");
}

std::string cnn_describe(const ModelConfig& m) {
  return fmt::format("cnn: conv3x3 {} channels, each with {} and max-pool 2, then linear to 10",
                     fmt::join(m.channels, "/"), m.activation);
}

// The op of each entry with its arguments: linear(out=10), relu.
std::string listed_describe(const ModelConfig& m) {
  std::vector<std::string> items;
  for (const auto& entry : m.layers) {
    if (!entry.is_object() || !entry.contains("op") || !entry["op"].is_string()) continue;
    std::vector<std::string> args;
    for (const auto& [key, value] : entry.items())
      if (key != "op") args.push_back(key + "=" + value.dump());
    items.push_back(entry["op"].get<std::string>() +
                    (args.empty() ? std::string() : fmt::format("({})", fmt::join(args, ", "))));
  }
  return fmt::format("layers: {}", fmt::join(items, ", "));
}

const ModelInfo kModels[] = {
    {"mlp", "Linear layers of model.hidden widths (+ LayerNorm), model.activation between", false, mlp_layers,
     torch_default_init, mlp_size, mlp_describe},
    {"cnn", "conv 3x3 + activation + max-pool 2 per model.channels entry, then a Linear", false, cnn_layers,
     torch_default_init, cnn_size, cnn_describe},
    {"gpt",
     "GPT-2-style decoder (nanoGPT): model.n_layer blocks of width model.n_embd, model.n_head heads, "
     "model.block_size tokens, tied output projection",
     true, gpt_layers, gpt_init, gpt_size, gpt_describe},
    {"layers", "model.layers: a list of op-table layers, e.g. [{\"op\": \"linear\", \"out\": 10}]", false,
     listed_layers, torch_default_init, listed_size, listed_describe},
};

}  // namespace

std::span<const ModelInfo> model_types() {
  return kModels;
}

const ModelInfo* find_model_type(const std::string& name) {
  for (const auto& m : kModels)
    if (name == m.name) return &m;
  return nullptr;
}

std::string model_type_names() {
  std::string s;
  for (const auto& m : kModels) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> out;
  for (auto& l : layers)
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

Model Model::clone() const {
  Model m;
  for (const auto& l : layers) m.layers.push_back(l->clone());
  for (auto& l : m.layers) l->link(m.layers);
  m.loss = loss->clone();
  return m;
}

namespace {

// The model's Linear layers (Conv2d's included) in forward order, residual
// bodies entered.
void collect_linears(const std::vector<std::unique_ptr<Layer>>& layers, std::vector<Linear*>& out) {
  for (const auto& l : layers) {
    if (auto* r = dynamic_cast<Residual*>(l.get())) collect_linears(r->body(), out);
    if (auto* lin = dynamic_cast<Linear*>(l.get())) out.push_back(lin);
  }
}

// Fp8Recipe::high_precision_last: the last N linear layers whose GEMMs the
// recipe block-scales run in bfloat16 instead (NVFP4's selective
// high-precision layers).
void keep_last_linears_high(const std::vector<std::unique_ptr<Layer>>& layers, const PrecisionPolicy& p) {
  if (!block_scaled(p.fp8.scaling) || p.fp8.high_precision_last == 0) return;
  std::vector<Linear*> all, scaled;
  collect_linears(layers, all);
  for (Linear* l : all)
    if (p.rule(l->op()).scaled_inputs) scaled.push_back(l);
  const std::size_t n = std::min<std::size_t>(scaled.size(), std::size_t(p.fp8.high_precision_last));
  for (std::size_t i = scaled.size() - n; i < scaled.size(); ++i) scaled[i]->set_high_precision(true);
}

// The row of the config's model type, checked against the data and the loss.
const ModelInfo& checked_row(const Config& config, const Dataset& data) {
  const ModelInfo* info = find_model_type(config.model.type);
  if (!info)
    throw ConfigError("model.type: unknown \"" + config.model.type + "\" (known: " + model_type_names() +
                      ")");
  if (info->text != data.text())
    throw ConfigError("model.type: " + config.model.type +
                      (info->text ? " needs a text" : " needs an image") + " data set, data.name gives " +
                      (data.text() ? "text" : "images"));
  const OpInfo* loss = find_op(config.loss);
  if (!loss || !loss->loss) throw ConfigError("loss: unknown \"" + config.loss + "\"");
  return *info;
}

}  // namespace

ModelSize model_size(const Config& config, const Dataset& data) {
  return checked_row(config, data).size(config.model, data);
}

Model build_model(const Config& config, const Dataset& data) {
  const ModelInfo& info = checked_row(config, data);
  (void)info.size(config.model, data);  // the row's checks of the config
  Model m;
  m.layers = info.layers(config.model, data);
  keep_last_linears_high(m.layers, config.policy);
  for (auto& l : m.layers) l->link(m.layers);
  m.loss = find_op(config.loss)->loss();
  info.init(m, config.model, config.seed, config.policy.parameter_storage());
  return m;
}

}  // namespace rpsim::sim::train
