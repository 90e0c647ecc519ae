// Token and position embeddings.
#include <cmath>
#include <stdexcept>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

Embedding::Embedding(std::string name, Eigen::Index vocabulary, Eigen::Index context, Eigen::Index width)
    : Layer(std::move(name)) {
  token.name = this->name() + ".token.weight";
  position.name = this->name() + ".position.weight";
  token.value = Matrix::Zero(vocabulary, width);
  position.value = Matrix::Zero(context, width);
}

Tensor Embedding::forward(const Tensor& x, const StepContext& ctx) {
  const PrecisionPolicy& pol = *ctx.policy;
  // The lookup reads the stored weights; "follow" means their format.
  const Formats f = resolve(pol.rule("embedding"), pol.parameter_storage());
  const Eigen::Index batch = x.values.rows(), t_count = x.values.cols(), width = token.value.cols();
  if (t_count > position.value.rows())
    throw std::invalid_argument(name() + ": " + std::to_string(t_count) + " tokens per row, context is " +
                                std::to_string(position.value.rows()));
  x_format_ = x.format;
  rows_ = batch * t_count;
  positions_ = t_count;
  ids_.assign(std::size_t(rows_), 0);
  const Matrix wte = rounded(*f.compute, token.value), wpe = rounded(*f.compute, position.value);
  Matrix tokens(rows_, width), positions(rows_, width);  // the rows each token reads
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index t = 0; t < t_count; ++t) {
      const double v = x.values(b, t);
      if (!(v >= 0 && v < double(token.value.rows())) || v != std::floor(v))
        throw std::invalid_argument(name() + ": token id " + std::to_string(v) + " outside the vocabulary");
      const Eigen::Index r = b * t_count + t;
      ids_[std::size_t(r)] = int(v);
      tokens.row(r) = wte.row(Eigen::Index(v));
      positions.row(r) = wpe.row(t);
    }
  Matrix y = add_rounded(tokens, positions, *f.compute);
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor Embedding::backward(const Tensor& dy, const StepContext& ctx, bool) {
  const PrecisionPolicy& pol = *ctx.policy;
  const Formats f = resolve(pol.rule("embedding"), pol.parameter_storage());
  const ValueRounding& acc = nearest_rounding(opmath(*f.backward));
  const Matrix d = rounded(*f.backward, dy.values);
  // Sums over the rows that read each weight row, in row order, in opmath.
  Matrix dwte = Matrix::Zero(token.value.rows(), token.value.cols());
  Matrix dwpe = Matrix::Zero(position.value.rows(), position.value.cols());
  for (Eigen::Index r = 0; r < rows_; ++r)
    for (Eigen::Index j = 0; j < d.cols(); ++j) {
      double& a = dwte(ids_[std::size_t(r)], j);
      a = acc(a + d(r, j));
      double& p = dwpe(r % positions_, j);
      p = acc(p + d(r, j));
    }
  auto store = [&](Parameter& prm, Matrix g, bool accumulate) {
    const Matrix raw = g;
    round_in_place(*f.output, g);
    round_in_place(*pol.gradients, g);
    std::int64_t flushed = count_flushed(raw, g);
    if (accumulate) {
      // autograd's AccumulateGrad: grad += new, in the gradient's format.
      const Matrix exact = prm.grad + g;
      Matrix sum = add_rounded(prm.grad, g, *pol.gradients);
      flushed += count_flushed(exact, sum);
      g = std::move(sum);
      flushed += prm.grad_underflow;
    }
    prm.grad = std::move(g);
    prm.grad_underflow = flushed;
  };
  // Decided before the call: an argument's order of evaluation is unspecified,
  // and `g` may be moved from dwte before dwte.size() is read (clang does:
  // the head's share was dropped).
  const bool add_to_head = tied_ && token.grad.size() == dwte.size();
  store(token, std::move(dwte), add_to_head);
  store(position, std::move(dwpe), false);
  return Tensor{Matrix(), x_format_};
}

}  // namespace rpsim::sim::train
