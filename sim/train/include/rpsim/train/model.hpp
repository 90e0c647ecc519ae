// Models: a stack of layers and a loss, built by one row of the model table
// (mlp, cnn, gpt, layers) from the config's "model" object.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "rpsim/train/data.hpp"
#include "rpsim/train/layers.hpp"

namespace rpsim::sim::train {

struct ModelConfig {
  std::string type = "mlp";           // a row of model_types()
  std::vector<int> hidden{256, 256};  // mlp: hidden widths
  std::string activation = "relu";    // relu or gelu
  bool layer_norm = false;            // mlp: LayerNorm after each hidden linear
  std::vector<int> channels{8, 16};   // cnn: conv(3x3, pad 1) + activation + maxpool(2) per entry
  // gpt (nanoGPT's names): blocks, width, heads, tokens per window.
  int n_layer = 4, n_embd = 128, n_head = 4, block_size = 64;
  nlohmann::json layers = nlohmann::json::array();  // layers: one op-table entry per layer
};

struct Config;

struct Model {
  std::vector<std::unique_ptr<Layer>> layers;
  std::unique_ptr<Loss> loss;
  std::vector<Parameter*> parameters();
  Model clone() const;  // deep copy, tied weights re-linked
};

// Elements a model holds and the work of its forward pass, worked out from
// its config without building it (a model too large for the machine must be
// refused before it is allocated; the run plan prices a run from these, so
// `rpsim train` builds the network once, in the trainer).
struct ModelSize {
  double parameters = 0;
  double activations_per_sample = 0;  // values saved for backward, one sample
  // Multiply-adds of the forward matmuls for one sample (a gpt sample is a
  // window of block_size tokens): the linear and convolution layers, the
  // attention's two products and the output head; lookups and elementwise
  // ops none.
  double forward_multiply_adds = 0;
};

// The model table: one row per model type.
struct ModelInfo {
  const char* name;
  const char* help;
  bool text;  // reads token windows (a text data set) rather than images
  // The layers for inputs of `data`'s shape (the loss and the initialisation
  // are added by build_model). Errors are ConfigErrors naming the key.
  std::vector<std::unique_ptr<Layer>> (*layers)(const ModelConfig& config, const Dataset& data);
  // Initialises the parameters (rounded to `storage`) from `seed`.
  void (*init)(Model& model, const ModelConfig& config, std::uint64_t seed, const Format& storage);
  // The sizes from the config alone, no tensor made (every row has one:
  // the memory check and the run plan run it before anything is
  // allocated). It also checks what `layers` needs of the config (errors
  // are ConfigErrors naming the key): build_model calls it first. Must give
  // the parameters `layers` builds and the multiply-adds their forward pass
  // does (test_model_size.cpp checks every row).
  ModelSize (*size)(const ModelConfig& config, const Dataset& data);
  // The model in words for the run plan's "model" line, from the config
  // alone, starting with the row's name ("mlp 784-256-256-10, relu").
  std::string (*describe)(const ModelConfig& config);
};
std::span<const ModelInfo> model_types();
const ModelInfo* find_model_type(const std::string& name);
std::string model_type_names();

// The sizes of `config`'s model for inputs of `data`'s shape, from its row's
// size column, after the checks build_model makes (the type is a row, the
// data's kind fits it, the loss is a loss): what build_model would refuse
// is refused here without building anything.
ModelSize model_size(const Config& config, const Dataset& data);

// A model of `config` for inputs of `data`'s shape with deterministic
// initialisation rounded to the policy's storage format.
Model build_model(const Config& config, const Dataset& data);

// The gpt row (gpt.cpp).
std::vector<std::unique_ptr<Layer>> gpt_layers(const ModelConfig& config, const Dataset& data);
void gpt_init(Model& model, const ModelConfig& config, std::uint64_t seed, const Format& storage);
ModelSize gpt_size(const ModelConfig& config, const Dataset& data);
std::string gpt_describe(const ModelConfig& config);

}  // namespace rpsim::sim::train
