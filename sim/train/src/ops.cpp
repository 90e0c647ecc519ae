// The op table and the factories of the ops that are layers of their own.
#include "rpsim/train/ops.hpp"

#include "rpsim/train/config_error.hpp"
#include "rpsim/train/layers.hpp"

namespace rpsim::sim::train {
namespace {

using namespace config_json;
using AC = AutocastClass;

int positive(const nlohmann::json& args, const char* key, long long fallback, const std::string& path) {
  if (!args.contains(key)) {
    if (fallback > 0) return int(fallback);
    fail(join(path, key), "missing");
  }
  const long long v = integer(args[key], join(path, key));
  if (v < 1 || v > 1 << 20) fail(join(path, key), "must be a positive integer, got " + describe(args[key]));
  return int(v);
}

void image_input(const LayerShape& s, const std::string& path, const char* op) {
  if (s.channels == 0) fail(path, std::string(op) + " needs an image input (channels, height, width)");
}

LayerSize size_linear(const nlohmann::json& args, const std::string& path, LayerShape& s) {
  check_keys(args, {"op", "out"}, path);
  const int out = positive(args, "out", 0, path);
  const LayerSize z{(double(s.features) + 1) * out, double(out), double(s.features) * out};
  s = LayerShape{out};
  return z;
}

std::unique_ptr<Layer> make_linear(const std::string& name, const nlohmann::json& args,
                                   const std::string& path, LayerShape& s) {
  const LayerShape in = s;
  size_linear(args, path, s);
  return std::make_unique<Linear>(name, in.features, s.features);
}

int conv_padding(const nlohmann::json& args, int k, const std::string& path) {
  return args.contains("padding") ? int(integer(args["padding"], join(path, "padding"))) : (k - 1) / 2;
}

LayerSize size_conv2d(const nlohmann::json& args, const std::string& path, LayerShape& s) {
  check_keys(args, {"op", "out_channels", "kernel", "padding"}, path);
  image_input(s, path, "conv2d");
  const int oc = positive(args, "out_channels", 0, path), k = positive(args, "kernel", 3, path);
  const int pad = conv_padding(args, k, path);
  if (pad < 0 || pad > k) fail(join(path, "padding"), "must be in [0, kernel]");
  const int oh = s.height + 2 * pad - k + 1, ow = s.width + 2 * pad - k + 1;
  if (oh < 1 || ow < 1) fail(join(path, "kernel"), "larger than the padded image");
  // Each output pixel is a dot product over the input channels' k x k window.
  const LayerSize z{(double(s.channels) * k * k + 1) * oc, double(oc) * oh * ow,
                    double(s.channels) * k * k * oc * oh * ow};
  s = LayerShape{Eigen::Index(oc) * oh * ow, oc, oh, ow};
  return z;
}

std::unique_ptr<Layer> make_conv2d(const std::string& name, const nlohmann::json& args,
                                   const std::string& path, LayerShape& s) {
  const LayerShape in = s;
  size_conv2d(args, path, s);
  const int k = positive(args, "kernel", 3, path);
  return std::make_unique<Conv2d>(name, in.channels, s.channels, in.height, in.width, k,
                                  conv_padding(args, k, path));
}

LayerSize size_max_pool2d(const nlohmann::json& args, const std::string& path, LayerShape& s) {
  check_keys(args, {"op", "size"}, path);
  image_input(s, path, "max_pool2d");
  const int size = positive(args, "size", 2, path);
  if (s.height / size < 1 || s.width / size < 1) fail(join(path, "size"), "larger than the image");
  s = LayerShape{Eigen::Index(s.channels) * (s.height / size) * (s.width / size), s.channels, s.height / size,
                 s.width / size};
  return LayerSize{0, double(s.features)};
}

std::unique_ptr<Layer> make_max_pool2d(const std::string& name, const nlohmann::json& args,
                                       const std::string& path, LayerShape& s) {
  const LayerShape in = s;
  size_max_pool2d(args, path, s);
  return std::make_unique<MaxPool2d>(name, in.channels, in.height, in.width, positive(args, "size", 2, path));
}

LayerSize size_elementwise(const nlohmann::json& args, const std::string& path, LayerShape& s) {
  check_keys(args, {"op"}, path);
  return LayerSize{0, double(s.features)};
}

template <class L>
std::unique_ptr<Layer> make_elementwise(const std::string& name, const nlohmann::json& args,
                                        const std::string& path, LayerShape& s) {
  size_elementwise(args, path, s);
  return std::make_unique<L>(name);
}

// The normalised values and the output, per feature; a gain and a bias.
LayerSize size_layer_norm(const nlohmann::json& args, const std::string& path, LayerShape& s) {
  check_keys(args, {"op"}, path);
  s = LayerShape{s.features};  // normalised per row: no image layout kept
  return LayerSize{2.0 * double(s.features), 2.0 * double(s.features)};
}

std::unique_ptr<Layer> make_layer_norm(const std::string& name, const nlohmann::json& args,
                                       const std::string& path, LayerShape& s) {
  size_layer_norm(args, path, s);
  return std::make_unique<LayerNorm>(name, s.features);
}

// PyTorch's autocast lists (torch/csrc/autograd/autocast_mode.cpp, CUDA):
// linear, conv2d, matmul/bmm lower precision; layer_norm, softmax, the losses
// binary32; the rest on neither list.
using TK = TorchKernel;

const OpInfo kOps[] = {
    {"linear", AC::lower_precision, true, "y = x W + b (torch.nn.Linear); layers entry {\"out\": N}",
     make_linear, size_linear, nullptr, TK::gemm, "linear", "Linear"},
    {"conv2d", AC::lower_precision, true,
     "2-D convolution, stride 1 (torch.nn.Conv2d); {\"out_channels\": N, \"kernel\": 3, \"padding\": 1}",
     make_conv2d, size_conv2d, nullptr, TK::gemm,
     "conv2d conv1d conv_transpose2d conv_transpose1d conv3d conv_transpose3d",
     "Conv2d Conv1d ConvTranspose2d ConvTranspose1d Conv3d ConvTranspose3d"},
    {"relu", AC::follow_inputs, false, "max(x, 0)", make_elementwise<ReLU>, size_elementwise, nullptr,
     TK::layout, "relu relu_", "ReLU"},
    {"gelu", AC::follow_inputs, false, "x Phi(x), the exact erf form (torch.nn.GELU)", make_elementwise<GELU>,
     size_elementwise, nullptr, TK::layer, "gelu", "GELU"},
    {"layer_norm", AC::fp32, false, "normalisation over each row's features (torch.nn.LayerNorm)",
     make_layer_norm, size_layer_norm, nullptr, TK::layer, "layer_norm", "LayerNorm"},
    {"max_pool2d", AC::follow_inputs, false, "max pooling, window = stride; {\"size\": 2}", make_max_pool2d,
     size_max_pool2d, nullptr, TK::layout, "max_pool2d max_pool1d", "MaxPool2d"},
    {"cross_entropy", AC::fp32, false, "softmax cross-entropy (log_softmax + nll_loss), mean over rows",
     nullptr, nullptr, [] { return std::unique_ptr<Loss>(std::make_unique<CrossEntropyLoss>()); }, TK::loss,
     "cross_entropy", "CrossEntropyLoss"},
    {"mse_loss", AC::fp32, false, "mean squared error against one-hot targets", nullptr, nullptr,
     [] { return std::unique_ptr<Loss>(std::make_unique<MSELoss>()); }, TK::loss, "mse_loss", "MSELoss"},
    // The transformer's ops (built by the gpt model).
    {"embedding", AC::follow_inputs, false,
     "token plus position embedding lookup (torch.nn.Embedding): in the weights' format", nullptr, nullptr,
     nullptr, TK::layout, "embedding", "Embedding"},
    {"matmul", AC::lower_precision, false, "attention's batched products q k^T and p v (torch.matmul / bmm)",
     nullptr, nullptr, nullptr, TK::gemm,
     "matmul mm bmm addmm baddbmm __matmul__ mv addmv addbmm linalg_matmul", ""},
    // autocast leaves dot out of both lists: it computes in its inputs' format (spectral_norm's sigma).
    {"dot", AC::follow_inputs, false, "inner product of two vectors (torch.dot): a row times a column",
     nullptr, nullptr, nullptr, TK::gemm, "dot vdot", ""},
    // autocast casts no in-place op: x.addmm_(a, b) is a GEMM in its inputs'
    // format (and torch refuses mixed ones), as dot.
    {"gemm_in_place", AC::follow_inputs, false,
     "a GEMM into its input (x.addmm_(a, b)): in its inputs' format, as autocast casts no in-place op",
     nullptr, nullptr, nullptr, TK::gemm, "addmm_ baddbmm_ addmv_ addbmm_", ""},
    {"softmax", AC::fp32, false, "attention's softmax over each row, its max subtracted first", nullptr,
     nullptr, nullptr, TK::layer, "softmax", "Softmax"},
    {"add", AC::follow_inputs, false, "residual add, in the wider format of its two inputs (type promotion)",
     nullptr, nullptr, nullptr, TK::elementwise, "add", ""},
    // F.linear on the embedding matrix, so autocast's linear rule; not an FP8
    // GEMM: Transformer Engine recipes (and Megatron's output layer) keep
    // the output projection in higher precision. rpsim.torch reaches it as an
    // F.linear whose weight is an nn.Embedding's table.
    {"lm_head", AC::lower_precision, false, "output projection tied to the token embedding (no bias)",
     nullptr, nullptr, nullptr, TK::gemm, "", ""},
};

}  // namespace

std::span<const OpInfo> ops() {
  return kOps;
}

const char* torch_kernel_name(TorchKernel k) {
  switch (k) {
    case TorchKernel::gemm: return "gemm";
    case TorchKernel::layer: return "layer";
    case TorchKernel::loss: return "loss";
    case TorchKernel::layout: return "layout";
    default: return "elementwise";
  }
}

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& o : kOps) n.emplace_back(o.name);
    return n;
  }();
  return names;
}

const OpInfo* find_op(const std::string& name) {
  for (const auto& o : kOps)
    if (name == o.name) return &o;
  return nullptr;
}

std::string op_list(bool (*keep)(const OpInfo&)) {
  std::string s;
  for (const auto& o : kOps)
    if (!keep || keep(o)) s += (s.empty() ? "" : ", ") + std::string(o.name);
  return s;
}

}  // namespace rpsim::sim::train
