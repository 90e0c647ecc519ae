// rpsim.gemm: D = A B + C under an accumulation model (sim/accumulation
// gemm.hpp), the model named by the same spec strings (or JSON objects) as
// `rpsim gemm` and training configs.
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "bindings.hpp"
#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/accumulation_kinds.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/io/process.hpp"

namespace rpsim::python {

sim::AccumulationModel model_arg(const py::object& model) {
  try {
    if (py::isinstance<py::str>(model)) return sim::AccumulationModel::parse(model.cast<std::string>());
    if (py::isinstance<py::dict>(model)) {
      const auto text = py::module_::import("json").attr("dumps")(model).cast<std::string>();
      return sim::AccumulationModel::from_json(nlohmann::json::parse(text));
    }
  } catch (const std::invalid_argument& e) {
    throw py::value_error(fmt::format("model: {}", e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw py::value_error(fmt::format("model: {}", e.what()));
  }
  throw py::type_error("model: must be a spec string ('tc:h100:fp16:fp32') or a dict ({'kind': 'tc', ...})");
}

// A 2-D array as the column-major Eigen matrix sim::gemm takes (one copy, and
// a conversion to float32 first for a float16 or non-contiguous array).
sim::Matrix matrix_arg(py::handle x, const char* what) {
  const py::array a = float_array(x, what);
  if (a.ndim() != 2)
    throw py::value_error(fmt::format("{}: must be a 2-D array, got {} dimensions", what, a.ndim()));
  return matrix_of(a);
}

// An optional scale array: None, a number (1x1), or a 1-D (as `row`: Mx1,
// else 1xN) or 2-D array.
static std::optional<sim::Matrix> scale_arg(const py::object& x, const char* what, bool row) {
  if (x.is_none()) return std::nullopt;
  const py::array v = float_array(x, what);
  if (v.ndim() == 2) return matrix_arg(v, what);
  const auto d = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(v);
  require_copy(d, v, what);
  if (v.ndim() > 1)
    throw py::value_error(fmt::format("{}: must have at most 2 dimensions, got {}", what, v.ndim()));
  const Eigen::Index n = v.ndim() == 0 ? 1 : static_cast<Eigen::Index>(v.shape(0));
  sim::Matrix m(row ? n : 1, row ? 1 : n);
  for (Eigen::Index i = 0; i < n; ++i) m.data()[i] = d.data()[i];
  return m;
}

sim::GemmScales scales_arg(const py::object& sfa, const py::object& sfb, const py::object& scale_a,
                           const py::object& scale_b) {
  sim::GemmScales scales;
  if (!sfa.is_none()) scales.sfa = matrix_arg(sfa, "sfa");
  if (!sfb.is_none()) scales.sfb = matrix_arg(sfb, "sfb");
  scales.scale_a = scale_arg(scale_a, "scale_a", true);
  scales.scale_b = scale_arg(scale_b, "scale_b", false);
  return scales;
}

namespace {

// `m` rounded to `fmt` (RNE), or checked to hold values of `fmt` already.
sim::Matrix in_format(const sim::Matrix& m, const Format& fmt, bool round, const char* what) {
  const sim::Matrix r = sim::round_to_format(m, fmt);
  if (round) return r;
  for (Eigen::Index j = 0; j < m.cols(); ++j)
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      if (!(r(i, j) == m(i, j) || (std::isnan(r(i, j)) && std::isnan(m(i, j)))))
        throw py::value_error(fmt::format("{}[{}, {}] = {} is not a value of {} (round_inputs=False)", what,
                                          i, j, m(i, j), fmt.name));
  return m;
}

// What sim::gemm holds beside A and B, counted as `rpsim gemm` counts it
// (cmd_gemm.cpp): their rounded copies, C, D, the exact product and |A||B|.
// Small A and B can ask for a D that cannot exist (200000 x 1 times 1 x
// 200000: 320 GB): refused before any of it is allocated, not bad_alloc.
void check_gemm_fits(Eigen::Index m, Eigen::Index k, Eigen::Index n) {
  const double bytes =
      8.0 * (2.0 * (double(m) * double(k) + double(k) * double(n)) + 4.0 * double(m) * double(n));
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (bytes > memory / 2)
    throw py::value_error(fmt::format(
        "A is {}x{} and B {}x{}: the GEMM needs {:.3g} GB, more than half of this machine's {:.3g} GB", m, k,
        k, n, bytes / 1e9, memory / 1e9));
}

int threads_arg(int threads) {
  io::check_threads(threads, "threads =", true);  // std::invalid_argument -> ValueError
  return threads == 0 ? omp_get_max_threads() : threads;
}

// The model spec with the block-scale keywords (block=, scale_format=) as
// the tc spec's selectors (scale=, scale_block=).
py::object scaled_spec(const py::object& model, const py::object& block, const py::object& scale_format) {
  if (block.is_none() && scale_format.is_none()) return model;
  if (!py::isinstance<py::str>(model))
    throw py::type_error(
        "block= and scale_format= take a tc spec string as model ('tc:b200:e4m3:fp32:tcgen05.mma')");
  std::string spec = model.cast<std::string>();
  if (!spec.starts_with("tc:"))
    throw py::value_error(
        fmt::format("scale_format/block: model '{}' is not a tc: spec (block scales are a Tensor "
                    "Core instruction's: tc:b200:e4m3:fp32:tcgen05.mma)",
                    spec));
  if (!scale_format.is_none()) {
    if (!py::isinstance<py::str>(scale_format))
      throw py::type_error("scale_format: must be 'ue8m0' or 'ue4m3'");
    if (spec.find(":scale=") != std::string::npos)
      throw py::value_error("scale_format: the model spec names scale= already");
    spec += ":scale=" + scale_format.cast<std::string>();
  }
  if (!block.is_none()) {
    if (!py::isinstance<py::int_>(block) || py::isinstance<py::bool_>(block))
      throw py::type_error("block: must be an integer (16 or 32)");
    if (spec.find(":scale_block=") != std::string::npos)
      throw py::value_error("block: the model spec names scale_block= already");
    spec += fmt::format(":scale_block={}", block.cast<long>());
  }
  return py::str(spec);
}

const Format& b_format(const sim::AccumulationModel& model) {
  const auto* tc = model.bare_instruction();
  return tc ? tc->b_input() : model.input_format();
}

py::array gemm_py(py::handle a, py::handle b, const py::object& c, const py::object& model_spec, int threads,
                  bool round_inputs, const py::object& sfa, const py::object& sfb, const py::object& block,
                  const py::object& scale_format, const py::object& scale_a, const py::object& scale_b) {
  const sim::AccumulationModel model = model_arg(scaled_spec(model_spec, block, scale_format));
  const Format& in = model.input_format();
  const sim::Matrix ma = in_format(matrix_arg(a, "A"), in, round_inputs, "A");
  const sim::Matrix mb = in_format(matrix_arg(b, "B"), b_format(model), round_inputs, "B");
  const sim::GemmScales scales = scales_arg(sfa, sfb, scale_a, scale_b);
  if (ma.cols() != mb.rows())
    throw py::value_error(
        fmt::format("A is {}x{} but B is {}x{}", ma.rows(), ma.cols(), mb.rows(), mb.cols()));
  check_gemm_fits(ma.rows(), ma.cols(), mb.cols());
  sim::Matrix mc = sim::Matrix::Zero(ma.rows(), mb.cols());
  if (!c.is_none()) {
    mc = in_format(matrix_arg(c, "C"), model.output_format(), round_inputs, "C");
    if (mc.rows() != ma.rows() || mc.cols() != mb.cols())
      throw py::value_error(
          fmt::format("C is {}x{} but A B is {}x{}", mc.rows(), mc.cols(), ma.rows(), mb.cols()));
  }
  const sim::GemmOptions options{threads_arg(threads)};
  sim::check_gemm_scales(model, ma.rows(), ma.cols(), mb.cols(), scales);  // ValueError naming the array
  sim::Matrix d;
  {
    py::gil_scoped_release release;
    d = sim::gemm(model, ma, mb, mc, scales, options);
  }
  return to_numpy(d);
}

// The accumulation-kind table (accumulation_kinds.hpp), one dict per row.
py::list accumulation_kinds_py() {
  py::list kinds;
  for (const sim::AccumulationKind& k : sim::accumulation_kinds()) {
    py::dict d;
    d["name"] = k.name;
    py::list aliases;
    for (std::string_view rest = k.aliases; !rest.empty();) {
      const auto space = rest.find(' ');
      aliases.append(std::string(rest.substr(0, space)));
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
    d["aliases"] = aliases;
    d["usage"] = k.usage;
    d["help"] = k.help;
    kinds.append(d);
  }
  return kinds;
}

}  // namespace

void bind_accumulation(py::module_& m) {
  using py::arg;
  m.def("accumulation_kinds", &accumulation_kinds_py,
        "The accumulation kinds (sim/accumulation accumulation_kinds.cpp), one dict per row: name, aliases, "
        "usage, help.");
  m.def(
      "accumulation_spec", [](const py::object& model) { return model_arg(model).spec(); }, arg("model"),
      "The canonical spec string of an accumulation model given as a spec string or a dict (what results "
      "record; parsing it gives the same model). ValueError names the bad token, TypeError a wrong type.");
  m.def(
      "kernel_preset_schedule",
      [](const py::object& model, long m, long n, long k) {
        const sim::AccumulationModel am = model_arg(model);
        const auto* p = std::get_if<sim::KernelPreset>(&am.variant());
        if (!p)
          throw py::value_error("kernel_preset_schedule: '" + am.spec() +
                                "' is not a kernel preset (cublas:...)");
        if (m < 1 || n < 1 || k < 1) throw py::value_error("kernel_preset_schedule: M, N and K must be >= 1");
        return sim::AccumulationModel(p->for_shape(m, n, k)).spec();
      },
      arg("model"), arg("M"), arg("N"), arg("K"),
      "The kernel schedule (a kernel:... spec string) that a kernel preset such as cublas:h100:fp16:fp32 "
      "picks for an M x N x K GEMM: what rpsim.gemm runs on a whole M x N x K product. Use it to run a "
      "block of a larger GEMM under the full shape's schedule. ValueError for a model that is no preset.");
  m.def("gemm", &gemm_py, arg("A"), arg("B"), arg("C") = py::none(), arg("model") = "tc:h100:fp16:fp32",
        py::kw_only(), arg("threads") = 0, arg("round_inputs") = true, arg("sfa") = py::none(),
        arg("sfb") = py::none(), arg("block") = py::none(), arg("scale_format") = py::none(),
        arg("scale_a") = py::none(), arg("scale_b") = py::none(),
        R"(D = A B + C under an accumulation model, as float64 values of the model's output format.

model: a spec string as `rpsim gemm --model` and training configs take it (tc:h100:fp16:fp32,
sequential:fp16:rne, blocked:32:bf16, exact, ...) or a dict ({'kind': 'tc', 'preset': 'a100'}).
A and B are rounded to the model's input format and C to its output format (nearest even), as a
cast before the kernel would; round_inputs=False instead raises ValueError for a value that is not
already one. threads: 0 is OpenMP's default; the result does not depend on it.

Block-scaled Tensor Core GEMMs (tcgen05.mma.block_scale on b200, mma.block_scale on rtx5090): a
tc spec with scale=ue8m0|ue4m3 [scale_block=16|32] (or the keywords scale_format= and block=), and
sfa (M x K/block, along A's rows) and sfb (K/block x N, along B's columns): scale values of that
format (mx_quantize(...)['scales']; a ue4m3 scale's sign is ignored). Each instruction's K products
take their blocks' scales as the instruction model does; longer K chains the instructions, C fed
forward. scale_a, scale_b: torch._scaled_mm-style binary32 scales, a number (per tensor), scale_a
of length M (per row), scale_b of length N (per column): D = fl32(scale_a scale_b) (A B) + C, each
step rounded to binary32, or as a kernel schedule's scale_epilogue says (a cublas preset given
per-row scales: fl32(scale_a fl32(scale_b (A B))) + C, torch's per-row path on the H100). Wrong shapes, K not a multiple of the block, or a scale format the
instruction does not take raise ValueError naming the argument.)");
}

}  // namespace rpsim::python
