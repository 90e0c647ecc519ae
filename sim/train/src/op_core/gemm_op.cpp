// The op core's GEMM op (gemm_op.hpp): casts, the GEMM, the epilogue, and
// the two backward GEMMs, under a plain rule, per-tensor FP8 scaling or
// block scaling (the block-scaled paths: gemm_op_block.cpp).
#include "rpsim/train/gemm_op.hpp"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "../layers/common.hpp"
#include "rpsim/accumulation/native_gemm.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/layers/fp8.hpp"

namespace rpsim::sim::train {
using namespace detail;

namespace {

// Whether every x[i] is a binary32 value; a NaN is not (the generic sum
// takes it). The native GEMM's vector scan: the scalar loop, which GCC does
// not vectorise (a conversion may trap), was 60% of the bias sum and 12% of
// a GPT-style 256x64x256 GEMM op's backward.
bool binary32_terms(const double* x, Eigen::Index n) {
  return (sim::native::scan_binary32(x, n) & (sim::native::kNotBinary32 | sim::native::kNaN)) == 0;
}

// sequential_sum(fmt, column j) for every column of `dy` (the bias
// gradient), the same bits: in binary64, and in binary32 where a block's
// terms are all binary32 values, kBlock columns' chains advance side by
// side, each still in row order. One chain at a time waited on the latency
// of every add (a bias sum was about 3% of the MLP step).
template <class T>
bool block_sums(const Matrix& dy, Eigen::Index j0, Eigen::Index cols, double* out) {
  constexpr Eigen::Index kBlock = 8;
  T acc[kBlock] = {};
  const Eigen::Index rows = dy.rows();
  const double* col[kBlock];
  for (Eigen::Index c = 0; c < cols; ++c) col[c] = dy.col(j0 + c).data();
  if constexpr (std::is_same_v<T, float>)
    for (Eigen::Index c = 0; c < cols; ++c)
      if (!binary32_terms(col[c], rows)) return false;
  for (Eigen::Index c = 0; c < cols; ++c) acc[c] = T(col[c][0]);
  for (Eigen::Index i = 1; i < rows; ++i)
    for (Eigen::Index c = 0; c < kBlock; ++c)
      if (c < cols) acc[c] += T(col[c][i]);
  for (Eigen::Index c = 0; c < cols; ++c) out[c] = double(acc[c]);
  return true;
}

Matrix bias_sums(const Format& fmt, const Matrix& dy) {
  constexpr Eigen::Index kBlock = 8;
  Matrix db(1, dy.cols());
  const bool f64 = fmt == formats::binary64(), f32 = fmt == formats::binary32();
  for (Eigen::Index j = 0; j < dy.cols(); j += kBlock) {
    const Eigen::Index cols = std::min(kBlock, dy.cols() - j);
    if (dy.rows() > 0 && f64 && block_sums<double>(dy, j, cols, &db(0, j))) continue;
    if (dy.rows() > 0 && f32 && block_sums<float>(dy, j, cols, &db(0, j))) continue;
    for (Eigen::Index c = j; c < j + cols; ++c) db(0, c) = sequential_sum(fmt, dy.col(c).data(), dy.rows());
  }
  return db;
}

// The epilogue's roundings are the op's tensor roundings (the policy's
// rounding mode, keyed per call).
void tensor_round(const Format& f, Matrix& m) {
  round_in_place(f, m);
}

}  // namespace

GemmSpec GemmSpec::of(const OpRule& rule, const PrecisionPolicy& policy, bool high_precision) {
  GemmSpec s;
  s.model = rule.accumulation;
  s.follow_inputs = rule.follow_inputs;
  s.compute = rule.compute;
  s.output = rule.output;
  s.backward = rule.backward_compute;
  if (rule.scaled_inputs) s.recipe = policy.fp8;
  s.high_precision = high_precision;
  return s;
}

bool GemmSpec::per_tensor_fp8() const {
  return recipe.scaling == Fp8Scaling::delayed || recipe.scaling == Fp8Scaling::current;
}

bool GemmSpec::block_scaled() const {
  return train::block_scaled(recipe.scaling) && !high_precision;
}

GemmKeys GemmKeys::of_layer(const std::string& name, const StepContext& ctx) {
  return GemmKeys{matmul_stream(name, ctx, 0), true, ctx.seed};
}

GemmOp::Formats GemmOp::formats(const Format& input) const {
  Formats f{spec_.compute, spec_.output, spec_.backward ? spec_.backward : spec_.compute,
            &spec_.model.output_format()};
  if (spec_.follow_inputs) f.compute = f.output = f.backward = &input;
  // A layer the recipe keeps in high precision casts its GEMM inputs to
  // bfloat16 (2509.25149 keeps them in BF16), outputs as the rule says.
  if (spec_.high_precision && train::block_scaled(spec_.recipe.scaling))
    f.compute = f.backward = &formats::bfloat16();
  return f;
}

// A layer kept in high precision under a policy whose GEMMs run on a
// block-scaled instruction runs the same GPU's unscaled one (bf16 inputs).
sim::AccumulationModel GemmOp::unscaled_model(const Format& compute) const {
  return spec_.high_precision ? high_precision_model(spec_.model, compute) : spec_.model;
}

// The operands cast to the compute format; without one (a bare model, as
// rpsim.gemm takes it) to the model's input format, to nearest even.
Matrix GemmOp::plain_forward(const Matrix& a, Matrix* owned, const Matrix& b, const Matrix* c,
                             const Formats& f, const GemmKeys& keys, GemmSaved& s) {
  const sim::AccumulationModel model = unscaled_model(*(f.compute ? f.compute : &spec_.model.input_format()));
  if (const sim::TensorCoreModel* tc = block_instruction(model))
    throw std::invalid_argument(fmt::format(
        "model: '{}' multiplies block-scaled operands (blocks of {} along K): give it a block-scaled recipe "
        "(rpsim.torch: GemmConfig(recipe='mxfp8'), or emulate(model, 'mxfp8', accumulation=...); rpsim.gemm: "
        "sfa=, sfb=)",
        model.spec(), tc->scale_block));
  // (A's values are of `input`: their cast is skipped where the compute format holds them.)
  if (f.compute && owned)
    s.ac = rounded_from(*f.compute, std::move(*owned), *s.a_format);
  else
    s.ac = f.compute ? rounded_from(*f.compute, a, *s.a_format)
                     : rounded(model.input_format(), a, RoundingMode::nearest_even);
  s.bc = f.compute ? rounded(*f.compute, b) : rounded(model.input_format(), b, RoundingMode::nearest_even);
  // (Both casts are values of it: where every product of two is exact, the
  // native kernel needs no scan of them to take FMA.)
  if (!c)
    return matmul(s.ac, s.bc, model, keys.stream(0),
                  short_format(f.compute ? *f.compute : model.input_format()));
  // C enters the accumulation where the model puts it (a Tensor Core chain
  // starts from it), in the model's output format, as rpsim.gemm(A, B, C).
  return sim::gemm(model, s.ac, s.bc, rounded(model.output_format(), *c, RoundingMode::nearest_even),
                   sim::GemmOptions{omp_get_max_threads()});
}

const Format* GemmOp::entrywise_cast(const Format& a_format) const {
  if (spec_.per_tensor_fp8() || spec_.block_scaled() || spec_.follow_inputs) return nullptr;
  const Formats f = formats(a_format);
  if (!f.compute || !tensor_rounding_is_nearest() || holds(*f.compute, a_format)) return nullptr;
  return f.compute;
}

Matrix GemmOp::per_tensor_forward(const Matrix& a, const Matrix& b, const Formats& f, const GemmKeys& keys,
                                  sim::GemmEpilogue& e, GemmSaved& s) {
  s.a_scale = fp8_scale(a, *f.compute, spec_.recipe, a_history_, &a_stats_);
  s.b_scale = fp8_scale(b, *f.compute, spec_.recipe, b_history_, &b_stats_);
  e.alpha = sim::dequantisation_factor(s.a_scale, s.b_scale);
  return matmul(fp8_quantize(a, *f.compute, s.a_scale, &a_stats_),
                fp8_quantize(b, *f.compute, s.b_scale, &b_stats_), spec_.model, keys.stream(0));
}

Matrix GemmOp::forward(const Matrix& a, const Format& a_format, const Matrix& b, const Matrix* bias,
                       const GemmKeys& keys, GemmSaved& s, const Matrix* c) {
  return forward_of(a, nullptr, a_format, b, bias, keys, s, c);
}

Matrix GemmOp::forward(Matrix&& a, const Format& a_format, const Matrix& b, const Matrix* bias,
                       const GemmKeys& keys, GemmSaved& s, const Matrix* c) {
  return forward_of(a, &a, a_format, b, bias, keys, s, c);
}

// owned: A itself where the caller gave it up (plain_forward may take it).
Matrix GemmOp::forward_of(const Matrix& a, Matrix* owned, const Format& a_format, const Matrix& b,
                          const Matrix* bias, const GemmKeys& keys, GemmSaved& s, const Matrix* c) {
  const Formats f = formats(a_format);
  const bool scaled = spec_.per_tensor_fp8() || spec_.block_scaled();
  if (scaled && c) throw std::invalid_argument("a GEMM with C under FP8 scaling is not modelled");
  // The operands themselves only where backward quantises them again (FP8);
  // the other paths keep their casts (a copy of a tensor the size of a
  // batch's activations saved per step).
  s = GemmSaved();
  s.a_size = a.size();
  if (scaled) {
    s.a = a;
    s.b = b;
  }
  s.a_format = &a_format;
  s.saved_format = f.compute;
  a_stats_ = b_stats_ = Fp8Stats();
  sim::GemmEpilogue e;
  e.round = &tensor_round;
  e.output = f.output;
  Matrix acc;
  if (spec_.block_scaled())
    acc = block_forward(a, b, f, keys, e);
  else if (spec_.per_tensor_fp8())
    acc = per_tensor_forward(a, b, f, keys, e, s);
  else
    acc = plain_forward(a, owned, b, c, f, keys, s);
  // The bias in the compute format, or the accumulation format under FP8
  // (Transformer Engine adds it in the accumulator's type).
  e.bias = bias;
  e.bias_format = scaled ? f.accumulation : f.compute;
  sim::apply_epilogue(e, *f.accumulation, acc);
  return acc;
}

void GemmOp::per_tensor_backward(const GemmSaved& s, const Matrix& dy, const Formats& f, bool need_da,
                                 const GemmKeys& keys, GemmGrads& g) {
  const double dy_scale = fp8_scale(dy, *f.backward, spec_.recipe, dy_history_, &dy_stats_);
  const Matrix dyq = fp8_quantize(dy, *f.backward, dy_scale, &dy_stats_);
  g.dy_cast_flushed = flushed_mask(dy, dyq);
  const Matrix at = s.a.transpose();
  g.db = matmul(fp8_quantize(at, *f.compute, s.a_scale), dyq, spec_.model, keys.stream(1));
  g.db_raw = g.db;
  dequantize(g.db, s.a_scale, dy_scale, *f.accumulation);
  if (need_da) {
    const Matrix bt = s.b.transpose();
    g.da = matmul(dyq, fp8_quantize(bt, *f.compute, s.b_scale), spec_.model, keys.stream(2));
    g.da_raw = g.da;
    dequantize(g.da, dy_scale, s.b_scale, *f.accumulation);
  }
}

GemmGrads GemmOp::backward(const GemmSaved& s, const Matrix& dy, bool need_da, bool need_db, bool need_dbias,
                           const GemmKeys& keys, const Format* b_grad_format, bool keep_raw) {
  const Formats f = formats(*s.a_format);
  GemmGrads g;
  Matrix dy_used;  // the gradient the bias sum reads
  dy_stats_ = Fp8Stats();
  if (spec_.block_scaled()) {
    block_backward(s, dy, f, need_da, keys, g);
    dy_used = dy;
  } else if (spec_.per_tensor_fp8()) {
    per_tensor_backward(s, dy, f, need_da, keys, g);
    dy_used = dy;  // Transformer Engine reduces dbias from the unquantised gradient
  } else {
    dy_used = f.backward ? rounded(*f.backward, dy)
                         : rounded(spec_.model.input_format(), dy, RoundingMode::nearest_even);
    g.dy_cast_flushed = flushed_mask(dy, dy_used);
    // The casts saved by forward (autocast saves the low-precision copies).
    const sim::AccumulationModel model =
        unscaled_model(*(f.compute ? f.compute : &spec_.model.input_format()));
    // (The saved casts and dY's are values of these: as forward's matmul.)
    const bool short_values = short_format(f.compute ? *f.compute : model.input_format()) &&
                              short_format(f.backward ? *f.backward : model.input_format());
    if (need_db) g.db = matmul_tn(s.ac, dy_used, model, keys.stream(1), short_values);
    if (need_da) g.da = matmul_nt(dy_used, s.bc, model, keys.stream(2), short_values);
  }
  // dA's raw copy (col2im's flush count) is made by rounding out of place
  // below when dA has an output rounding: a copy and an in-place rounding
  // were two more passes over the im2col-sized gradient (2.4% of a
  // ResNet-style step).
  const bool da_raw_by_rounding = !spec_.per_tensor_fp8() && keep_raw && need_da && f.output;
  if (!spec_.per_tensor_fp8() && keep_raw) {
    g.db_raw = g.db;
    if (need_da && !da_raw_by_rounding) g.da_raw = g.da;
  }
  if (!keep_raw) g.da_raw = g.db_raw = Matrix();
  // rpsim train's order of the roundings (under a stochastic policy each
  // draws the next stream of the step): dB, the bias gradient, then dA.
  auto to_output = [&](Matrix& m, bool parameter) {
    if (f.output) round_in_place(*f.output, m);
    if (parameter && b_grad_format) round_in_place(*b_grad_format, m);
  };
  if (need_db) to_output(g.db, true);
  if (need_dbias) {
    g.dbias = bias_sums(*f.accumulation, dy_used);
    g.dbias_raw = g.dbias;
    to_output(g.dbias, true);
  }
  if (da_raw_by_rounding) {
    g.da_raw = std::move(g.da);
    g.da = rounded(*f.output, g.da_raw);  // round_in_place's stream: the same bits
  } else if (need_da) {
    to_output(g.da, false);
  }
  if (!need_db) g.db = g.db_raw = Matrix();
  return g;
}

std::vector<std::pair<std::string, const Fp8Stats*>> GemmOp::fp8_stats() const {
  if (!spec_.per_tensor_fp8() && !spec_.block_scaled()) return {};
  return fp8_records();
}

}  // namespace rpsim::sim::train
