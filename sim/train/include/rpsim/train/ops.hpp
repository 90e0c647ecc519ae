// The op table: every op the training simulator knows, one row each, with
// its autocast class (PyTorch's CUDA autocast lists), whether the FP8
// policies run it as an FP8 GEMM, its help text and, for an op that is a
// layer of its own, the factory a "layers" model builds it with. Policies
// (the per-op rules), config parsing and error messages read this table;
// adding a layer is one row here, its file under layers/ and its tests.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Core>

namespace rpsim::sim::train {

class Layer;
class Loss;

// torch.autocast's CUDA op lists: "lower_precision_fp" ops cast their inputs
// to the autocast format, "fp32" ops to binary32; ops on neither list run in
// the format of their inputs (the widest, by type promotion).
enum class AutocastClass { lower_precision, fp32, follow_inputs };

// What a layer of a "layers" model sees of its input: features per row, and
// for images their (channels, height, width) layout (channels 0: no image).
struct LayerShape {
  Eigen::Index features = 0;
  int channels = 0, height = 0, width = 0;
};

// Builds the layer `name` from its config entry `args` (errors name `path`)
// for inputs of `shape`, which it updates to the layer's output shape.
using LayerFactory = std::unique_ptr<Layer> (*)(const std::string& name, const nlohmann::json& args,
                                                const std::string& path, LayerShape& shape);
using LossFactory = std::unique_ptr<Loss> (*)();
// What a layer holds, from its config entry and input shape alone (no
// tensors are made): its parameters, the values it saves per sample for
// backward (its output; the model's input is counted apart) and the
// multiply-adds of its forward matmuls per sample (what the run plan's time
// estimate is priced by).
struct LayerSize {
  double parameters = 0, activations_per_sample = 0, multiply_adds = 0;
};
// Checks the entry `args` (errors name `path`) for inputs of `shape`,
// updates `shape` to the layer's output shape and gives the layer's sizes;
// the layer's factory calls it first, so a layer is sized and checked once.
using LayerSizer = LayerSize (*)(const nlohmann::json& args, const std::string& path, LayerShape& shape);

// How rpsim.torch runs an op of the table under emulate(): on the op core's
// GEMM op (forward and both backward GEMMs), on a layer's C++ kernel (its
// forward and backward), as a loss kernel, or as PyTorch's own op with its
// output rounded to the op rule's format (layout: nothing to round where the
// rule follows its inputs, as a view or a max does).
enum class TorchKernel { gemm, layer, loss, layout, elementwise };

struct OpInfo {
  const char* name;  // as PyTorch spells the op
  AutocastClass autocast;
  // An FP8 GEMM (e4m3 forward, e5m2 gradients, scaled inputs) under the fp8
  // policies: Transformer Engine's te.Linear modules.
  bool fp8_gemm;
  const char* help;
  LayerFactory layer;  // null: a part of another layer, or a loss
  LayerSizer size;     // non-null exactly when `layer` is
  LossFactory loss;    // non-null: a loss
  // rpsim.torch's columns: how it runs the op, and PyTorch's names for it
  // (space-separated): the torch functions and Tensor methods
  // (TorchFunctionMode's names), and the torch.nn module types.
  TorchKernel torch_kernel;
  const char* torch_functions;
  const char* torch_modules;
};

std::span<const OpInfo> ops();
const char* torch_kernel_name(TorchKernel k);
const std::vector<std::string>& op_names();
// The row of `name`, or null.
const OpInfo* find_op(const std::string& name);
// The names of the rows `keep` accepts, comma-separated (for error messages).
std::string op_list(bool (*keep)(const OpInfo&) = nullptr);

// PyTorch's names for ops outside the op table, one row each, by what
// rpsim.torch does with them: torch.autocast's CUDA lists (an op on neither
// list follows its inputs), the ops with no arithmetic, the modules whose
// fused GEMMs rpsim.torch refuses (with what to write instead), and the
// modules it runs as the GEMMs and elementwise ops they are made of (and
// those of autocast's lower-precision list it runs so, on inputs cast first,
// and of its fp32 list on inputs in binary32, their inner ops uncast);
// aten_gemm: the dispatcher's ops ("aten::mm") that run a GEMM, which no
// emulated forward may reach (a torch function running one inside PyTorch's
// own kernel is refused at its call, by the name the emulation saw);
// result_saving: the in-place ops whose backward reads their own result,
// which rpsim.torch runs as their out-of-place twin.
enum class TorchClass {
  lower_precision,
  fp32,
  layout,
  refused,
  refused_module,
  decomposed,
  lower_precision_decomposed,
  fp32_decomposed,
  aten_gemm,
  result_saving
};
struct TorchName {
  const char* name;
  TorchClass cls;
  const char* note;  // refused: what to write instead; refused_module: the function it calls
};
std::span<const TorchName> torch_names();
const char* torch_class_name(TorchClass c);

}  // namespace rpsim::sim::train
