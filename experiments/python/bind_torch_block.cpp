// rpsim.torch's block-scaled GEMM operands (rpsim/torch/_blockscale.py): rpsim
// train's block_quantize_recipe under the mx and nvfp4 recipes (1D blocks or 2D
// tiles, NVFP4's per-tensor scale, stochastic rounding keyed as the trainer
// keys it), the random Hadamard transform on the weight-gradient GEMM's
// inputs, the trainer's per-layer, per-step random stream, and its GEMM of
// two block-quantised operands (block_gemm.hpp: on a block-scaled Tensor
// Core instruction the block scales go in as SFA / SFB).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bind_config.hpp"
#include "bindings.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/layers/fp8.hpp"

namespace rpsim::python {

namespace {

namespace train = sim::train;

train::Fp8Recipe block_recipe(const std::string& scaling, int block) {
  train::Fp8Recipe r;
  if (scaling == "mx")
    r.scaling = train::Fp8Scaling::mx;
  else if (scaling == "nvfp4")
    r.scaling = train::Fp8Scaling::nvfp4;
  else if (scaling == "blockwise")
    r.scaling = train::Fp8Scaling::blockwise;
  else
    throw py::value_error(
        fmt::format("scaling: '{}' is not a block-scaled recipe (mx nvfp4 blockwise)", scaling));
  if (block < 1) throw py::value_error(fmt::format("block: {} (a block holds at least 1 entry)", block));
  r.block_size = block;
  return r;
}

// (values, stats, tensor_scale, scales): block_quantize of a 2-D array, with
// each entry's block scale; `sr` (seed, stream) rounds the elements
// stochastically.
py::tuple quantize_with(py::handle x, const std::string& format, const train::Fp8Recipe& r, int axis,
                        bool tiles, std::optional<std::pair<std::uint64_t, std::uint64_t>> sr) {
  if (axis != 0 && axis != 1)
    throw py::value_error(fmt::format("axis: {} (0: down columns, 1: along rows)", axis));
  const train::Matrix m = matrix_arg(x, "x");
  train::RandomStream stream;
  if (sr) stream = train::RandomStream{sr->first, sr->second};
  train::Fp8Stats s;
  double tensor_scale = 1;
  train::Matrix scales;
  train::Matrix q;
  try {
    q = train::block_quantize_recipe(m, format_arg(format), r,
                                     train::BlockLayout{axis, tiles, sr ? &stream : nullptr}, &s,
                                     &tensor_scale, &scales);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
  return py::make_tuple(to_numpy(q), fp8_stats_dict(s), tensor_scale, to_numpy(scales));
}

py::tuple block_quantize_py(py::handle x, const std::string& format, const std::string& scaling, int block,
                            int axis, bool tiles, std::optional<std::pair<std::uint64_t, std::uint64_t>> sr) {
  return quantize_with(x, format, block_recipe(scaling, block), axis, tiles, sr);
}

// The same with the policy's whole fp8 recipe (its "fp8" object as
// _torch_policy writes it), so the recipe options (scale_rule,
// nvfp4_formula, pow2_scales) reach the quantiser; read by the config parser.
py::tuple block_quantize_recipe_py(py::handle x, const std::string& format, const py::dict& recipe, int axis,
                                   bool tiles, std::optional<std::pair<std::uint64_t, std::uint64_t>> sr) {
  py::dict spec;
  spec["name"] = "fp8";
  spec["fp8"] = recipe;
  const train::Fp8Recipe r = policy_arg(spec).fp8;
  if (!train::block_scaled(r.scaling))
    throw py::value_error("recipe: its scaling is not a block-scaled recipe (mx nvfp4 blockwise)");
  return quantize_with(x, format, r, axis, tiles, sr);
}

train::Matrix item(const F64& a, py::ssize_t i) {
  const py::ssize_t r = a.shape(1), c = a.shape(2);
  return Eigen::Map<const RowMajor>(a.data() + i * r * c, r, c);
}

// D[i] = A[i] B[i] for each i of a batch of block-quantised operands (values
// and per-entry block scales of one shape, as _torch_block_quantize gives
// them), through the trainer's block_matmul: on a block-scaled instruction
// the elements and their block scales (SFA / SFB) go in, for the operand
// pair's instruction of the preset; under any other model the values are
// multiplied, keyed (seed, stream + i) unless both are 0, as _torch_gemm.
py::array block_gemm_py(py::handle a_in, py::handle sa_in, const std::string& a_format, py::handle b_in,
                        py::handle sb_in, const std::string& b_format, const py::object& model_spec,
                        std::uint64_t seed, std::uint64_t stream, int blockwise_block, bool a_tiles,
                        bool b_tiles) {
  const sim::AccumulationModel model = model_arg(model_spec);
  const F64 a = batched_array(a_in, "A"), sa = batched_array(sa_in, "SA"), b = batched_array(b_in, "B"),
            sb = batched_array(sb_in, "SB");
  const py::ssize_t batch = a.shape(0), m = a.shape(1), k = a.shape(2), n = b.shape(2);
  if (b.shape(0) != batch || b.shape(1) != k)
    throw py::value_error(
        fmt::format("A is {}x{}x{} but B is {}x{}x{}", batch, m, k, b.shape(0), b.shape(1), n));
  for (const auto& [x, s, name] : {std::tuple{&a, &sa, "SA"}, {&b, &sb, "SB"}})
    for (int d = 0; d < 3; ++d)
      if (s->shape(d) != x->shape(d))
        throw py::value_error(fmt::format("{}: one scale per entry of its operand (dimension {}: {} vs {})",
                                          name, d, s->shape(d), x->shape(d)));
  const Format &fa = format_arg(a_format), &fb = format_arg(b_format);
  py::array_t<double> out({batch, m, n});
  double* dst = out.mutable_data();
  const bool keyed = seed != 0 || stream != 0;
  try {
    py::gil_scoped_release release;
    for (py::ssize_t i = 0; i < batch; ++i) {
      const bool bw = blockwise_block > 0;
      const train::BlockOperand oa{item(a, i), item(sa, i), &fa, bw, a_tiles, blockwise_block},
          ob{item(b, i), item(sb, i), &fb, bw, b_tiles, blockwise_block};
      Eigen::Map<RowMajor>(dst + i * m * n, m, n) = train::block_matmul(
          oa, ob, model,
          keyed ? train::RandomStream{seed, stream + std::uint64_t(i)} : train::RandomStream{});
    }
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
  return out;
}

// The unscaled instruction of the same GPU for inputs in `input` (NVFP4's
// layers kept in bf16) as a spec, or None where `model` is no block-scaled
// instruction (it runs as it is).
py::object high_precision_model_py(const py::object& model_spec, const std::string& input) {
  const sim::AccumulationModel model = model_arg(model_spec);
  if (!train::block_instruction(model)) return py::none();
  try {
    return py::str(train::high_precision_model(model, format_arg(input)).spec());
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
}

// emulate(model, policy, accumulation=...): `accumulation` in place of the
// accumulation of each of `ops` (the GEMM rows rpsim.torch runs), checked as
// the config parser checks a policy's ops.OP.accumulation (a block-scaled
// instruction against the recipe's scale format, block and operand pairs),
// the ValueError naming the argument `name`.
void check_accumulation_py(const py::object& policy, const py::object& accumulation,
                           const std::vector<std::string>& ops, const std::string& name) {
  const train::PrecisionPolicy p = policy_arg(policy);
  const sim::AccumulationModel model = model_arg(accumulation);
  for (const auto& op : ops) {
    train::OpRule rule = p.rule(op);
    rule.accumulation = model;
    try {
      train::check_block_instruction(p, rule, fmt::format("{} (for policy {}, op {})", name, p.name, op));
    } catch (const std::invalid_argument& e) {
      throw py::value_error(e.what());
    }
  }
}

py::array hadamard_rows_py(py::handle x, int n, std::uint64_t seed) {
  try {
    return to_numpy(train::hadamard_rows(matrix_arg(x, "x"), train::hadamard_transform(n, seed)));
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
}

// The trainer's key of one GEMM of one layer at one step (layers/common.hpp
// matmul_stream): FNV-1a of the layer name mixed with the step, plus `which`.
std::pair<std::uint64_t, std::uint64_t> matmul_stream_py(const std::string& layer, std::uint64_t seed,
                                                         std::uint64_t step, std::uint64_t which) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char ch : layer) h = (h ^ ch) * 0x100000001b3ull;
  return {seed, mix64(h ^ mix64(step)) + which};
}

}  // namespace

void bind_torch_block(py::module_& m) {
  using py::arg;
  m.def("_torch_block_quantize", &block_quantize_py, arg("x"), arg("format"), arg("scaling"), arg("block"),
        arg("axis"), arg("tiles") = false, arg("sr") = py::none(),
        "rpsim train's block quantisation (mx or nvfp4) of a 2-D array: (values, stats, tensor_scale, "
        "scales), scales one per entry (its block's).");
  m.def("_torch_block_quantize", &block_quantize_recipe_py, arg("x"), arg("format"), arg("recipe"),
        arg("axis"), arg("tiles") = false, arg("sr") = py::none(),
        "The same with the policy's fp8 recipe object (scaling, block_size and the recipe options).");
  m.def("_torch_block_gemm", &block_gemm_py, arg("A"), arg("SA"), arg("a_format"), arg("B"), arg("SB"),
        arg("b_format"), arg("model"), arg("seed") = 0, arg("stream") = 0, arg("blockwise_block") = 0,
        arg("a_tiles") = false, arg("b_tiles") = false,
        "rpsim train's GEMM of block-quantised operands over a batch (block_matmul; blockwise_block > 0: FP8 "
        "block scaling's fold per k tile of that size, a_tiles / b_tiles for 128x128 operands): on a "
        "block-scaled "
        "instruction the block scales go in as SFA / SFB.");
  m.def("_torch_high_precision_model", &high_precision_model_py, arg("model"), arg("input"),
        "The same GPU's unscaled instruction (a spec) for a block-scaled one, else None.");
  m.def("_torch_check_accumulation", &check_accumulation_py, arg("policy"), arg("accumulation"), arg("ops"),
        arg("name") = "accumulation",
        "ValueError naming `accumulation` where it cannot replace the policy's on these ops.");
  m.def("_torch_hadamard_rows", &hadamard_rows_py, arg("x"), arg("n"), arg("seed"),
        "rpsim train's random Hadamard transform of size n on each full chunk of n rows, in binary32.");
  m.def("_torch_matmul_stream", &matmul_stream_py, arg("layer"), arg("seed"), arg("step"), arg("which"),
        "rpsim train's (seed, stream) of one GEMM of a layer at a step.");
}

}  // namespace rpsim::python
