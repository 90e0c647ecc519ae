// The op core from Python: rpsim.torch's autograd functions call the GEMM op
// that rpsim train's layers call (sim/train gemm_op.hpp), on NumPy views of
// the tensors, so the step's arithmetic is not written a second time in
// Python. _GemmSpec is resolved once per call site; each forward call gets a
// _GemmSaved (autograd's saved tensors) for its backward.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "bind_config.hpp"
#include "bindings.hpp"
#include "rpsim/train/conv_op.hpp"
#include "rpsim/train/gemm_op.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/op_formats.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::python {

namespace {

namespace train = sim::train;

// The keys of batch item i: (seed, stream + i) where seed or stream is set
// (rpsim.gemm's draws per product), or rpsim train's keys of a layer.
struct Keys {
  train::GemmKeys base;
  train::GemmKeys item(py::ssize_t i) const {
    train::GemmKeys k = base;
    k.base.stream += std::uint64_t(i);
    return k;
  }
};

Keys keys_arg(std::uint64_t seed, std::uint64_t stream, const py::object& layer) {
  if (!layer.is_none()) {
    const auto [name, step] = layer.cast<std::pair<std::string, std::uint64_t>>();
    train::StepContext ctx;
    ctx.seed = seed;
    ctx.step = step;
    return Keys{train::GemmKeys::of_layer(name, ctx)};
  }
  return Keys{train::GemmKeys{train::RandomStream{seed, stream}, seed != 0 || stream != 0, seed}};
}

// One call site's GEMM op (spec and persistent scaling state); forward and
// backward on NumPy batches.
class PyGemmOp {
 public:
  explicit PyGemmOp(train::GemmSpec spec) : op_(std::move(spec)) {}
  const train::GemmSpec& spec() const { return op_.spec(); }
  const train::GemmOp& op() const { return op_; }

  // Per batch item: the saved state of each forward (one object per call).
  struct Saved {
    std::vector<train::GemmSaved> items;  // per group where groups > 1
    int groups = 1;
  };

  py::tuple forward(const py::handle& a_in, const std::string& a_format, const py::handle& b_in,
                    const py::object& bias_in, const py::object& c_in, std::uint64_t seed,
                    std::uint64_t stream, const py::object& layer, bool f32, bool fold_a, int groups,
                    bool column_major, const py::object& patches) {
    std::vector<sim::Matrix> a = patches.is_none() ? matrices(a_in, "A", fold_a) : folded_patches(patches);
    std::vector<sim::Matrix> b = matrices(b_in, "B");
    if (groups != 1)
      return forward_grouped(a, a_format, b, bias_in, keys_arg(seed, stream, layer), f32, groups,
                             column_major);
    std::vector<sim::Matrix> c = c_in.is_none() ? std::vector<sim::Matrix>() : matrices(c_in, "C");
    if (!c.empty() && (c.size() != a.size() || c[0].rows() != a[0].rows() || c[0].cols() != b[0].cols()))
      throw py::value_error("C (batch, m, n) disagrees with A (batch, m, k) and B (batch, k, n)");
    if (a.size() != b.size() || (!a.empty() && a[0].cols() != b[0].rows()))
      throw py::value_error(fmt::format("A is {}x{}x{} but B is {}x{}x{}", a.size(),
                                        a.empty() ? 0 : a[0].rows(), a.empty() ? 0 : a[0].cols(), b.size(),
                                        b.empty() ? 0 : b[0].rows(), b.empty() ? 0 : b[0].cols()));
    if (a.size() > 1 && (op_.spec().per_tensor_fp8() || op_.spec().block_scaled()))
      throw py::value_error("a batched GEMM under FP8 scaling: rpsim scales the inputs of 2-D GEMMs only");
    const Format& af = format_arg(a_format);
    sim::Matrix bias;
    if (!bias_in.is_none()) bias = matrix_arg(bias_in, "bias");
    const Keys keys = keys_arg(seed, stream, layer);
    auto saved = std::make_shared<Saved>();
    saved->items.resize(a.size());
    std::vector<sim::Matrix> out(a.size());
    {
      py::gil_scoped_release release;
      for (std::size_t i = 0; i < a.size(); ++i)
        out[i] = op_.forward(std::move(a[i]), af, b[i], bias_in.is_none() ? nullptr : &bias,
                             keys.item(py::ssize_t(i)), saved->items[i], c.empty() ? nullptr : &c[i]);
    }
    return py::make_tuple(stacked_in(std::move(out), f32, column_major), py::cast(saved));
  }

  // What backward hands back, and how (the keyword arguments of backward).
  struct Wanted {
    bool need_a, need_b, need_bias;
    bool raw, masks;
    bool a_mask;          // dA's mask too (with masks)
    bool a_f32, b_f32;    // dA, dB as float32 (else float64)
    bool a_column_major;  // dA (1, m, k) as a view of column-major storage (a folded A)
    bool b_column_major;  // dB in B's layout where B is column-major (a weight's transpose)
  };

  py::dict backward(const Saved& saved, const py::handle& dy_in, bool need_a, bool need_b, bool need_bias,
                    std::uint64_t seed, std::uint64_t stream, const py::object& layer,
                    const py::object& b_grad, bool raw, bool masks, bool a_f32, bool b_f32, bool a_mask,
                    bool a_column_major, bool b_column_major) {
    std::vector<sim::Matrix> dy = matrices(dy_in, "dY");
    if (dy.size() != (saved.groups > 1 ? 1 : saved.items.size()))
      throw py::value_error("dY's batch differs from forward's");
    const Keys keys = keys_arg(seed, stream, layer);
    const Format* bg = optional_format(b_grad);
    std::vector<train::GemmGrads> g(dy.size());
    {
      py::gil_scoped_release release;
      if (saved.groups > 1) {
        g = {backward_grouped(saved, dy[0], need_a, need_b, need_bias, keys.item(0), bg, raw || masks)};
      } else {
        for (std::size_t i = 0; i < dy.size(); ++i)
          g[i] = op_.backward(saved.items[i], dy[i], need_a, need_b, need_bias, keys.item(py::ssize_t(i)), bg,
                              raw || masks);
      }
    }
    return grads_dict(g, Wanted{need_a, need_b, need_bias, raw, masks, a_mask, a_f32, b_f32, a_column_major,
                                b_column_major});
  }

  // GemmOp::entrywise_cast applied to x (bind_op_core's docstring).
  py::object cast_input(const py::array& x, const std::string& a_format) const {
    const Format* f = op_.entrywise_cast(format_arg(a_format));
    const bool f32 = py::isinstance<py::array_t<float>>(x);
    if (!f || !holds(f32 ? formats::binary32() : formats::binary64(), *f)) return py::none();
    std::vector<sim::Matrix> m{matrix_of(x)};
    train::round_in_place(*f, m[0]);
    return py::make_tuple(stacked_as(m, f32), f->name);
  }

  py::dict fp8_stats() const {
    py::dict d;
    for (const auto& [name, s] : op_.fp8_stats()) {
      py::dict one = fp8_stats_dict(*s);
      if (op_.spec().per_tensor_fp8()) one["scale"] = s->scale_min;  // the one scale used
      d[py::str(name)] = one;
    }
    return d;
  }

 private:
  py::tuple forward_grouped(std::vector<sim::Matrix>& a, const std::string& a_format,
                            std::vector<sim::Matrix>& b, const py::object& bias_in, const Keys& keys,
                            bool f32, int groups, bool column_major);
  train::GemmGrads backward_grouped(const Saved& saved, const sim::Matrix& dy, bool need_a, bool need_b,
                                    bool need_bias, const train::GemmKeys& keys, const Format* bg, bool raw);
  static py::dict grads_dict(std::vector<train::GemmGrads>& g, const Wanted& w);
  train::GemmOp op_;
};

// A grouped convolution's GEMMs in one call: A (m x groups * kg), B (kg x
// groups * ng), group g's product A's columns [g kg, (g+1) kg) times B's
// columns [g ng, (g+1) ng) with its slice of the bias, into those columns of
// the output. Each group is the op's own 2-D call, in group order, with the
// keys a lone call has (the per-group calls rpsim.torch made from Python, one
// autograd node each: a depthwise layer's hundreds of them took seconds).
py::tuple PyGemmOp::forward_grouped(std::vector<sim::Matrix>& a, const std::string& a_format,
                                    std::vector<sim::Matrix>& b, const py::object& bias_in, const Keys& keys,
                                    bool f32, int groups, bool column_major) {
  if (groups < 1 || a.size() != 1 || b.size() != 1 || a[0].cols() % groups || b[0].cols() % groups ||
      a[0].cols() / groups != b[0].rows())
    throw py::value_error(
        fmt::format("groups={}: A (1, m, groups * k) and B (1, k, groups * n) are needed, "
                    "got A {}x{}x{} and B {}x{}x{}",
                    groups, a.size(), a.empty() ? 0 : a[0].rows(), a.empty() ? 0 : a[0].cols(), b.size(),
                    b.empty() ? 0 : b[0].rows(), b.empty() ? 0 : b[0].cols()));
  const Format& af = format_arg(a_format);
  const Eigen::Index kg = b[0].rows(), ng = b[0].cols() / groups;
  sim::Matrix bias;
  if (!bias_in.is_none()) bias = matrix_arg(bias_in, "bias");
  if (bias.size() && bias.cols() != b[0].cols())
    throw py::value_error(
        fmt::format("groups={}: the bias has {} entries, B {} columns", groups, bias.cols(), b[0].cols()));
  auto saved = std::make_shared<Saved>();
  saved->items.resize(std::size_t(groups));
  saved->groups = groups;
  std::vector<sim::Matrix> out(1, sim::Matrix(a[0].rows(), b[0].cols()));
  {
    py::gil_scoped_release release;
    for (int g = 0; g < groups; ++g) {
      const sim::Matrix bg = bias.size() ? sim::Matrix(bias.middleCols(g * ng, ng)) : sim::Matrix();
      out[0].middleCols(g * ng, ng) =
          op_.forward(a[0].middleCols(g * kg, kg), af, b[0].middleCols(g * ng, ng),
                      bias.size() ? &bg : nullptr, keys.item(0), saved->items[std::size_t(g)], nullptr);
    }
  }
  return py::make_tuple(stacked_in(std::move(out), f32, column_major), py::cast(saved));
}

// Its backward: each group's, last group first (the order autograd ran the
// per-group nodes in: the FP8 histories see the same sequence), the
// gradients and their raw values joined in A's, B's and the bias's layouts.
train::GemmGrads PyGemmOp::backward_grouped(const Saved& saved, const sim::Matrix& dy, bool need_a,
                                            bool need_b, bool need_bias, const train::GemmKeys& keys,
                                            const Format* bg, bool raw) {
  const int groups = saved.groups;
  const Eigen::Index ng = dy.cols() / groups;
  std::vector<train::GemmGrads> parts(static_cast<std::size_t>(groups));
  for (int g = groups - 1; g >= 0; --g)
    parts[std::size_t(g)] = op_.backward(saved.items[std::size_t(g)], dy.middleCols(g * ng, ng), need_a,
                                         need_b, need_bias, keys, bg, raw);
  const auto join = [&](auto field) {
    using M = std::decay_t<decltype(parts[0].*field)>;
    const M& first = parts[0].*field;
    if (first.size() == 0) return M();
    M out(first.rows(), first.cols() * groups);
    for (int g = 0; g < groups; ++g)
      out.middleCols(g * first.cols(), first.cols()) = parts[std::size_t(g)].*field;
    return out;
  };
  train::GemmGrads j;
  j.da = join(&train::GemmGrads::da);
  j.da_raw = join(&train::GemmGrads::da_raw);
  j.db = join(&train::GemmGrads::db);
  j.db_raw = join(&train::GemmGrads::db_raw);
  j.dbias = join(&train::GemmGrads::dbias);
  j.dbias_raw = join(&train::GemmGrads::dbias_raw);
  j.dy_cast_flushed = join(&train::GemmGrads::dy_cast_flushed);
  return j;
}

// The gradients, and with `masks` the entries each rounding flushed to zero
// (nonzero before, zero after): dA's and dB's output roundings, the bias
// gradient's, and dY's cast (telemetry; each in its tensor's shape).
py::dict PyGemmOp::grads_dict(std::vector<train::GemmGrads>& g, const Wanted& w) {
  const bool need_a = w.need_a, need_b = w.need_b, need_bias = w.need_bias, raw = w.raw, masks = w.masks;
  py::dict d;
  std::vector<sim::Matrix> da, db, da_raw;
  std::vector<train::Mask> da_flushed, db_flushed, dy_cast;
  train::Mask bias_flushed;
  sim::Matrix dbias;
  // The op core's mask (its vector loop: Eigen's bool expression here was
  // scalar, 4% of an MLP step).
  const auto flushed = [](const sim::Matrix& before, const sim::Matrix& after) {
    return train::flushed_mask(before, after);
  };
  for (auto& x : g) {
    if (need_a) {
      if (masks && w.a_mask) da_flushed.push_back(flushed(x.da_raw, x.da));
      if (raw) da_raw.push_back(std::move(x.da_raw));
      da.push_back(std::move(x.da));
    }
    if (need_b) {
      if (masks) db_flushed.push_back(flushed(x.db_raw, x.db));
      db.push_back(std::move(x.db));
    }
    if (need_bias) {
      if (masks) {
        const train::Mask m = flushed(x.dbias_raw, x.dbias);
        bias_flushed = bias_flushed.size() ? train::Mask(bias_flushed || m) : m;
      }
      dbias = dbias.size() ? sim::Matrix(dbias + x.dbias) : x.dbias;
    }
    if (masks) dy_cast.push_back(std::move(x.dy_cast_flushed));  // every path casts dY
  }
  const auto mask_or_none = [&](bool on, const std::vector<train::Mask>& m) {
    return on && masks ? py::object(stacked_mask(m)) : py::none();
  };
  d["da"] = !need_a            ? py::none()
            : w.a_column_major ? py::object(column_major_as(std::move(da), w.a_f32))
                               : py::object(stacked_as(da, w.a_f32));
  d["da_raw"] = need_a && raw ? py::object(stacked_taken(std::move(da_raw))) : py::none();
  // dB in B's layout, as ATen's mm_mat2_backward: a weight's transpose takes
  // it with no transposing copy here or in AccumulateGrad (the same values).
  d["db"] = need_b ? py::object(stacked_in(std::move(db), w.b_f32, w.b_column_major)) : py::none();
  d["bias"] = need_bias ? py::object(to_numpy(dbias)) : py::none();
  d["da_flushed"] = mask_or_none(need_a && w.a_mask, da_flushed);
  d["db_flushed"] = need_b && masks ? py::object(stacked_mask(db_flushed, w.b_column_major)) : py::none();
  d["dy_cast_flushed"] = mask_or_none(true, dy_cast);
  if (need_bias && masks) {
    py::array_t<bool> b(bias_flushed.size());
    for (Eigen::Index j = 0; j < bias_flushed.size(); ++j) b.mutable_data()[j] = bias_flushed(j);
    d["bias_flushed"] = b;
  } else {
    d["bias_flushed"] = py::none();
  }
  return d;
}

// A spec from a policy's op rule (emulate), an accumulation spec overriding
// the rule's where given.
train::GemmSpec policy_spec(const py::object& policy, const std::string& op, bool high_precision,
                            const py::object& accumulation) {
  const train::PrecisionPolicy p = policy_arg(policy);
  train::GemmSpec s = train::GemmSpec::of(p.rule(op), p, high_precision);
  if (!accumulation.is_none()) s.model = model_arg(accumulation);
  return s;
}

// A spec from an accumulation model and formats (rpsim.torch.GemmConfig):
// recipe, a block-scaled policy whose fp8 recipe quantises the operands.
train::GemmSpec model_spec(const py::object& model, const py::object& compute, const py::object& backward,
                           const py::object& output, const py::object& recipe) {
  train::GemmSpec s;
  s.model = model_arg(model);
  s.compute = optional_format(compute);
  s.backward = optional_format(backward);
  s.output = optional_format(output);
  if (!recipe.is_none()) s.recipe = policy_arg(recipe).fp8;
  return s;
}

}  // namespace

void bind_op_core(py::module_& m) {
  using py::arg;
  py::class_<PyGemmOp::Saved, std::shared_ptr<PyGemmOp::Saved>>(m, "_GemmSaved");
  py::class_<PyGemmOp>(m, "_GemmOp")
      .def_static(
          "of_policy",
          [](const py::object& policy, const std::string& op, bool high_precision,
             const py::object& accumulation) {
            return PyGemmOp(policy_spec(policy, op, high_precision, accumulation));
          },
          arg("policy"), arg("op"), arg("high_precision") = false, arg("accumulation") = py::none(),
          "The GEMM op of `op`'s rule under `policy` (its accumulation replaced by `accumulation` if given).")
      .def_static(
          "of_model",
          [](const py::object& model, const py::object& compute, const py::object& backward,
             const py::object& output, const py::object& recipe) {
            return PyGemmOp(model_spec(model, compute, backward, output, recipe));
          },
          arg("model"), arg("compute") = py::none(), arg("backward") = py::none(), arg("output") = py::none(),
          arg("recipe") = py::none(),
          "A GEMM op under an accumulation model, with optional casts and recipe.")
      .def("forward", &PyGemmOp::forward, arg("A"), arg("a_format"), arg("B"), arg("bias") = py::none(),
           arg("C") = py::none(), arg("seed") = 0, arg("stream") = 0, arg("layer") = py::none(),
           arg("float32") = false, arg("fold_a") = false, arg("groups") = 1, arg("column_major") = false,
           arg("patches") = py::none(),
           "(epilogue(A B (+ C)) as float64 (batch, m, n) (float32=True: as float32), saved) for A (batch, "
           "m, k), B (batch, k, n), float32 or float64 arrays at any strides. fold_a: A (N, m, k) is one "
           "(N * m, k) matrix (batch 1), read where it lies. groups: a grouped convolution's GEMMs, A (1, m, "
           "groups * k), B (1, k, groups * n), group g's columns of each, its slice of the bias. "
           "column_major: a batch of one comes back over column-major storage (no transposing copy: a "
           "convolution's (N * L, C) result, which it permutes to (N, C, L) itself). patches: (x, kernel, "
           "dilation, padding, stride): A is x's im2col, folded, made in place of A's values (conv2d).")
      .def("backward", &PyGemmOp::backward, arg("saved"), arg("dY"), arg("need_a"), arg("need_b"),
           arg("need_bias") = false, arg("seed") = 0, arg("stream") = 0, arg("layer") = py::none(),
           arg("b_grad_format") = py::none(), arg("raw") = false, arg("masks") = false,
           arg("a_float32") = false, arg("b_float32") = false, arg("a_mask") = true,
           arg("a_column_major") = false, arg("b_column_major") = false,
           "{da, db, bias, da_raw (raw=True); with masks=True the masks of the entries flushed to zero: "
           "da_flushed (unless a_mask=False), db_flushed, bias_flushed, dy_cast_flushed} of the forward call "
           "that made `saved`; da and db as float64, or float32 where a_float32 / b_float32. "
           "a_column_major: da (1, m, k) as a view of column-major storage (a folded A: conv2d's col2im "
           "reads it at its strides), not a C-contiguous copy. b_column_major: db (1, k, n) likewise, in the "
           "layout of a column-major B (a weight's transpose).")
      // A deep copy of an emulated model copies its emulation: the op with its scaling state.
      .def("__copy__", [](const PyGemmOp& o) { return PyGemmOp(o); })
      .def(
          "__deepcopy__", [](const PyGemmOp& o, const py::dict&) { return PyGemmOp(o); }, arg("memo"))
      .def("fp8_stats", &PyGemmOp::fp8_stats, "{x, w, dy: statistics} of the op's quantisations this step.")
      .def(
          "output_format",
          [](const PyGemmOp& o, const std::string& input) {
            return o.op().output_format(format_arg(input)).name;
          },
          arg("input_format"), "The format of the op's results for inputs of `input_format`.")
      .def("cast_input", &PyGemmOp::cast_input, arg("x"), arg("a_format"),
           "(x's entries cast as forward casts an A of a_format, as (1, rows, cols) of x's dtype; the "
           "format to give forward for an A copied from them) for a 2-D C-contiguous x, where that cast "
           "rounds each entry on its own and x's dtype holds the result; else None. A convolution casts "
           "its input before im2col: a k*k-th of the entries.")
      .def_property_readonly("model", [](const PyGemmOp& o) { return o.spec().model.spec(); })
      .def_property_readonly("scale_block",
                             [](const PyGemmOp& o) {
                               const sim::TensorCoreModel* tc = o.spec().model.bare_instruction();
                               return tc ? tc->scale_block : 0;
                             })
      .def_property_readonly("accumulation_format",
                             [](const PyGemmOp& o) { return o.spec().model.output_format().name; })
      .def_property_readonly("input_format",
                             [](const PyGemmOp& o) { return o.spec().model.input_format().name; })
      .def_property_readonly(
          "scaled", [](const PyGemmOp& o) { return o.spec().per_tensor_fp8() || o.spec().block_scaled(); });
  m.def(
      "_promote_formats",
      [](const std::string& a, const std::string& b) {
        return train::promote(format_arg(a), format_arg(b)).name;
      },
      arg("a"), arg("b"),
      "PyTorch's type promotion over rpsim's formats (the one that holds the other, else binary32, else "
      "binary64), as rpsim train's layers apply it.");
}

}  // namespace rpsim::python
