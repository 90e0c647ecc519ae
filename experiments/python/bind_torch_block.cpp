// rpsim.torch's block-scaled GEMM operands (rpsim/torch/_blockscale.py): rpsim
// train's block_quantize under the mx and nvfp4 recipes (1D blocks or 2D
// tiles, NVFP4's per-tensor scale, stochastic rounding keyed as the trainer
// keys it), the random Hadamard transform on the weight-gradient GEMM's
// inputs, and the trainer's per-layer, per-step random stream.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "rpsim/formats/random.hpp"
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
  else
    throw py::value_error(fmt::format("scaling: '{}' is not a block-scaled recipe (mx nvfp4)", scaling));
  if (block < 1) throw py::value_error(fmt::format("block: {} (a block holds at least 1 entry)", block));
  r.block_size = block;
  return r;
}

// (values, stats, tensor_scale): block_quantize of a 2-D array; `sr` (seed,
// stream) rounds the elements stochastically.
py::tuple block_quantize_py(py::handle x, const std::string& format, const std::string& scaling, int block,
                            int axis, bool tiles, std::optional<std::pair<std::uint64_t, std::uint64_t>> sr) {
  if (axis != 0 && axis != 1)
    throw py::value_error(fmt::format("axis: {} (0: down columns, 1: along rows)", axis));
  const train::Fp8Recipe r = block_recipe(scaling, block);
  const train::Matrix m = matrix_arg(x, "x");
  train::RandomStream stream;
  if (sr) stream = train::RandomStream{sr->first, sr->second};
  train::Fp8Stats s;
  double tensor_scale = 1;
  const train::Matrix q = train::block_quantize(
      m, format_arg(format), r, train::BlockLayout{axis, tiles, sr ? &stream : nullptr}, &s, &tensor_scale);
  return py::make_tuple(to_numpy(q), fp8_stats_dict(s), tensor_scale);
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
        "rpsim train's block quantisation (mx or nvfp4) of a 2-D array: (values, stats, tensor_scale).");
  m.def("_torch_hadamard_rows", &hadamard_rows_py, arg("x"), arg("n"), arg("seed"),
        "rpsim train's random Hadamard transform of size n on each full chunk of n rows, in binary32.");
  m.def("_torch_matmul_stream", &matmul_stream_py, arg("layer"), arg("seed"), arg("step"), arg("which"),
        "rpsim train's (seed, stream) of one GEMM of a layer at a step.");
}

}  // namespace rpsim::python
