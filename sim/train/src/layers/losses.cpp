// Softmax cross-entropy and mean squared error.
#include <cmath>
#include <vector>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

double CrossEntropyLoss::forward(const Tensor& logits, const std::vector<int>& labels,
                                 const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("cross_entropy"), *logits.format);
  const Format& c = *f.compute;
  const ValueRounding& rc = nearest_rounding(c);
  compute_ = &c;
  logits_format_ = logits.format;
  labels_ = labels;
  const Matrix z = rounded(c, logits.values);
  const Eigen::Index batch = z.rows(), classes = z.cols();
  probabilities_.resize(batch, classes);
  std::vector<double> e(static_cast<std::size_t>(classes)), losses(static_cast<std::size_t>(batch));
  for (Eigen::Index i = 0; i < batch; ++i) {
    const double m = z.row(i).maxCoeff();
    for (Eigen::Index j = 0; j < classes; ++j) e[std::size_t(j)] = rc(std::exp(rc(z(i, j) - m)));
    const double s = sequential_sum(c, e.data(), classes);
    const double log_s = round_value(c, std::log(s));
    for (Eigen::Index j = 0; j < classes; ++j) probabilities_(i, j) = rc(e[std::size_t(j)] / s);
    const int y = labels[std::size_t(i)];
    // -log softmax_y = log s - (z_y - m)
    losses[std::size_t(i)] = round_value(c, log_s - round_value(c, z(i, y) - m));
  }
  return round_value(c, sequential_sum(c, losses.data(), batch) / double(batch));
}

Tensor CrossEntropyLoss::backward(double scale, const StepContext&) {
  const Format& c = *compute_;
  const Eigen::Index batch = probabilities_.rows();
  const double seed = round_value(c, scale / double(batch));
  Matrix d = probabilities_;
  for (Eigen::Index i = 0; i < batch; ++i)
    d(i, labels_[std::size_t(i)]) = round_value(c, d(i, labels_[std::size_t(i)]) - 1.0);
  d *= seed;
  const Matrix raw = d;
  round_in_place(c, d);
  round_in_place(*logits_format_, d);
  Mask flushed = flushed_mask(raw, d);
  return Tensor{std::move(d), logits_format_, std::move(flushed)};
}

double MSELoss::forward(const Tensor& logits, const std::vector<int>& labels, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("mse_loss"), *logits.format);
  const Format& c = *f.compute;
  compute_ = &c;
  logits_format_ = logits.format;
  diff_ = rounded(c, logits.values);
  for (Eigen::Index i = 0; i < diff_.rows(); ++i)
    diff_(i, labels[std::size_t(i)]) = round_value(c, diff_(i, labels[std::size_t(i)]) - 1.0);
  Matrix sq = diff_.cwiseProduct(diff_);
  round_in_place(c, sq);
  return round_value(c, sequential_sum(c, sq.data(), sq.size()) / double(sq.size()));
}

Tensor MSELoss::backward(double scale, const StepContext&) {
  const Format& c = *compute_;
  const double seed = round_value(c, 2.0 * scale / double(diff_.size()));
  Matrix d = diff_ * seed;
  const Matrix raw = d;
  round_in_place(c, d);
  round_in_place(*logits_format_, d);
  Mask flushed = flushed_mask(raw, d);
  return Tensor{std::move(d), logits_format_, std::move(flushed)};
}

}  // namespace rpsim::sim::train
