// Causal self-attention: scores, softmax, weighted values, and their
// derivatives, each op in the formats of its rule.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common.hpp"
#include "rpsim/accumulation/tiled_copy.hpp"

namespace rpsim::sim::train {
using namespace detail;

namespace {

// A product of the "matmul" rule: result rounded to the accumulation's
// output format, then to the op's output format; `raw` keeps it unrounded.
Matrix product(const Matrix& a, const Matrix& b, const OpRule& rule, const Format& out, RandomStream stream,
               Matrix* raw = nullptr) {
  Matrix c = matmul(a, b, rule.accumulation, stream);
  if (raw) *raw = c;
  round_in_place(rule.accumulation.output_format(), c);
  round_in_place(out, c);
  return c;
}

// x * c in the format of x's values as an elementwise kernel does it (c a
// Python float: cast to opmath, the product in opmath, rounded to f).
void scale_in_place(Matrix& m, double c, const Format& f) {
  const Format& op = opmath(f);
  const double cs = round_value(op, c);
  m *= cs;
  round_in_place(op, m, RoundingMode::nearest_even);
  round_in_place(f, m, RoundingMode::nearest_even);
}

RandomStream head_stream(const std::string& name, const StepContext& ctx, Eigen::Index r, int h, int heads,
                         int which) {
  return matmul_stream(name, ctx, std::uint64_t((r * heads + h) * 8 + which));
}

}  // namespace

Mask causal_mask(Eigen::Index t) {
  Mask keep(t, t);
  for (Eigen::Index i = 0; i < t; ++i)
    for (Eigen::Index j = 0; j < t; ++j) keep(i, j) = j <= i;
  return keep;
}

// One rounding to c per operation, each row's kept entries in index order
// (the sum sequential, as a row of a CUDA softmax kernel adds in our
// model of it); masked entries take no part and stay 0.
Matrix softmax_rows(const Matrix& scores, const Format& c, const Mask& keep) {
  const ValueRounding& rc = nearest_rounding(c);
  const Matrix att = rounded(c, scores);
  Matrix p = Matrix::Zero(att.rows(), att.cols());
  std::vector<double> e(static_cast<std::size_t>(att.cols()));
  std::vector<Eigen::Index> kept(e.size());
  for (Eigen::Index i = 0; i < att.rows(); ++i) {
    std::size_t n = 0;
    double m = -std::numeric_limits<double>::infinity();
    for (Eigen::Index j = 0; j < att.cols(); ++j)
      if (keep(i, j)) {
        kept[n++] = j;
        m = std::max(m, att(i, j));
      }
    if (n == 0) continue;
    for (std::size_t k = 0; k < n; ++k) e[k] = rc(std::exp(rc(att(i, kept[k]) - m)));
    const double sum = sequential_sum(c, e.data(), Eigen::Index(n));
    for (std::size_t k = 0; k < n; ++k) p(i, kept[k]) = rc(e[k] / sum);
  }
  return p;
}

Matrix softmax_rows_backward(const Matrix& p, const Matrix& dp_in, const Format& c, const Mask& keep) {
  const ValueRounding& rc = nearest_rounding(c);
  const Matrix dp = rounded(c, dp_in);
  Matrix ds = Matrix::Zero(p.rows(), p.cols());
  std::vector<double> prod(static_cast<std::size_t>(p.cols()));
  std::vector<Eigen::Index> kept(prod.size());
  for (Eigen::Index i = 0; i < p.rows(); ++i) {
    std::size_t n = 0;
    for (Eigen::Index j = 0; j < p.cols(); ++j)
      if (keep(i, j)) kept[n++] = j;
    if (n == 0) continue;
    for (std::size_t k = 0; k < n; ++k) prod[k] = rc(dp(i, kept[k]) * p(i, kept[k]));
    const double sum = sequential_sum(c, prod.data(), Eigen::Index(n));
    for (std::size_t k = 0; k < n; ++k) {
      const Eigen::Index j = kept[k];
      ds(i, j) = rc(p(i, j) * rc(dp(i, j) - sum));
    }
  }
  return ds;
}

CausalSelfAttention::CausalSelfAttention(std::string name, int context, int heads)
    : Layer(std::move(name)), context_(context), heads_(heads) {
  if (context < 1 || heads < 1)
    throw std::invalid_argument(this->name() + ": context and heads must be positive");
}

void CausalSelfAttention::forward_head(const Matrix& x, Eigen::Index r, int h, const StepContext& ctx,
                                       Matrix& y) {
  const PrecisionPolicy& pol = *ctx.policy;
  const OpRule& mm = pol.rule("matmul");
  const Formats fs = resolve(mm, *x_format_);
  Head& s = saved_[std::size_t(r * heads_ + h)];
  const Eigen::Index d = head_dim_, row0 = r * t_;
  s.q = rounded(*fs.compute, x.block(row0, h * d, t_, d));
  s.k = rounded(*fs.compute, x.block(row0, width_ + h * d, t_, d));
  Matrix att = product(s.q, sim::transposed(s.k), mm, *fs.output, head_stream(name(), ctx, r, h, heads_, 0));
  scale_in_place(att, 1.0 / std::sqrt(double(d)), *fs.output);
  // Softmax over each row, the future masked to -inf, its max subtracted.
  const Formats fp = resolve(pol.rule("softmax"), *fs.output);
  s.p = softmax_rows(att, *fp.compute, causal_mask(t_));
  round_in_place(*fp.output, s.p);
  const Formats fv = resolve(mm, promote(*fp.output, *x_format_));
  s.pc = rounded(*fv.compute, s.p);
  s.v = rounded(*fv.compute, x.block(row0, 2 * width_ + h * d, t_, d));
  y.block(row0, h * d, t_, d) = product(s.pc, s.v, mm, *fv.output, head_stream(name(), ctx, r, h, heads_, 1));
  scores_format_ = fs.output;
  probs_format_ = fp.output;
  y_format_ = fv.output;
}

Tensor CausalSelfAttention::forward(const Tensor& x, const StepContext& ctx) {
  if (x.values.cols() % (3 * heads_) != 0)
    throw std::invalid_argument(name() + ": " + std::to_string(x.values.cols()) +
                                " input columns, not 3 * heads * k");
  t_ = context_;
  if (x.values.rows() % t_ != 0)
    throw std::invalid_argument(name() + ": rows are not whole windows of " + std::to_string(t_) + " tokens");
  width_ = x.values.cols() / 3;
  head_dim_ = width_ / heads_;
  x_format_ = x.format;
  const Eigen::Index windows = x.values.rows() / t_;
  saved_.assign(std::size_t(windows * heads_), Head{});
  Matrix y(x.values.rows(), width_);
  for (Eigen::Index r = 0; r < windows; ++r)
    for (int h = 0; h < heads_; ++h) forward_head(x.values, r, h, ctx, y);
  return Tensor{std::move(y), y_format_};
}

void CausalSelfAttention::backward_head(const Matrix& dy, Eigen::Index r, int h, const StepContext& ctx,
                                        Matrix& dx, Matrix& raw) {
  const PrecisionPolicy& pol = *ctx.policy;
  const OpRule& mm = pol.rule("matmul");
  const Head& s = saved_[std::size_t(r * heads_ + h)];
  const Eigen::Index d = head_dim_, row0 = r * t_;
  // y = p v: gradients of p (to p's format) and v (to x's).
  const Formats fv = resolve(mm, promote(*probs_format_, *x_format_));
  const Matrix g = rounded(*fv.backward, dy.block(row0, h * d, t_, d));
  Matrix dv_raw,
      dp = product(g, sim::transposed(s.v), mm, *fv.output, head_stream(name(), ctx, r, h, heads_, 2));
  Matrix dv =
      product(sim::transposed(s.pc), g, mm, *fv.output, head_stream(name(), ctx, r, h, heads_, 3), &dv_raw);
  round_in_place(*probs_format_, dp);
  // Softmax backward in its compute format: ds = p * (dp - sum(dp * p)).
  const Formats fp = resolve(pol.rule("softmax"), *scores_format_);
  Matrix ds = softmax_rows_backward(s.p, dp, *fp.compute, causal_mask(t_));
  round_in_place(*fp.output, ds);
  round_in_place(*scores_format_, ds);
  scale_in_place(ds, 1.0 / std::sqrt(double(d)), *scores_format_);
  // att = q k^T: gradients of q and k.
  const Formats fs = resolve(mm, *x_format_);
  const Matrix gs = rounded(*fs.backward, ds);
  Matrix dq_raw, dk_raw;
  const Matrix dq = product(gs, s.k, mm, *fs.output, head_stream(name(), ctx, r, h, heads_, 4), &dq_raw);
  const Matrix dk =
      product(sim::transposed(gs), s.q, mm, *fs.output, head_stream(name(), ctx, r, h, heads_, 5), &dk_raw);
  dx.block(row0, h * d, t_, d) = dq;
  dx.block(row0, width_ + h * d, t_, d) = dk;
  dx.block(row0, 2 * width_ + h * d, t_, d) = dv;
  raw.block(row0, h * d, t_, d) = dq_raw;
  raw.block(row0, width_ + h * d, t_, d) = dk_raw;
  raw.block(row0, 2 * width_ + h * d, t_, d) = dv_raw;
}

Tensor CausalSelfAttention::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  const Eigen::Index rows = dy.values.rows();
  Matrix dx(rows, 3 * width_), raw(rows, 3 * width_);
  for (Eigen::Index r = 0; r < rows / t_; ++r)
    for (int h = 0; h < heads_; ++h) backward_head(dy.values, r, h, ctx, dx, raw);
  round_in_place(*x_format_, dx);
  Mask flushed = flushed_mask(raw, dx);
  return Tensor{std::move(dx), x_format_, std::move(flushed)};
}

std::vector<std::pair<Eigen::Index, const Format*>> CausalSelfAttention::saved() const {
  // Autograd keeps q, k, v (cast), the softmax output and its cast copy.
  Eigen::Index qkv = 0, p = 0;
  for (const Head& s : saved_) {
    qkv += s.q.size() + s.k.size() + s.v.size();
    p += s.p.size();
  }
  return {{qkv, y_format_}, {p, probs_format_}, {p, y_format_}};
}

}  // namespace rpsim::sim::train
