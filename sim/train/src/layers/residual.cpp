// Residual connections.
#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

Residual::Residual(std::string name, std::vector<std::unique_ptr<Layer>> body)
    : Layer(std::move(name)), body_(std::move(body)) {}

Residual::Residual(const Residual& other)
    : Layer(other), x_format_(other.x_format_), body_format_(other.body_format_) {
  for (const auto& l : other.body_) body_.push_back(l->clone());
}

std::vector<Parameter*> Residual::parameters() {
  std::vector<Parameter*> out;
  for (auto& l : body_)
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

void Residual::link(std::vector<std::unique_ptr<Layer>>& layers) {
  for (auto& l : body_) l->link(layers);
}

Tensor Residual::forward(const Tensor& x, const StepContext& ctx) {
  Tensor h = x;
  for (auto& l : body_) h = l->forward(h, ctx);
  x_format_ = x.format;
  body_format_ = h.format;
  const Formats f = resolve(ctx.policy->rule("add"), promote(*x.format, *h.format));
  const Matrix a = rounded(*f.compute, x.values), b = rounded(*f.compute, h.values);
  Matrix y = add_rounded(a, b, *f.compute);
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor Residual::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  // dy reaches the body's output cast to its format ...
  Tensor g{rounded(*body_format_, dy.values), body_format_};
  g.flushed = flushed_mask(dy.values, g.values);
  if (dy.flushed.size()) g.flushed = g.flushed || dy.flushed;
  for (std::size_t i = body_.size(); i-- > 0;) g = body_[i]->backward(g, ctx, true);
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  // ... and x cast to x's; the two gradients of x add in x's format.
  const Matrix direct = rounded(*x_format_, dy.values);
  Mask direct_flushed = flushed_mask(dy.values, direct);
  if (dy.flushed.size()) direct_flushed = direct_flushed || dy.flushed;
  Matrix dx = add_rounded(direct, g.values, *x_format_);
  // Flushed: zero after the add and either flushed by the add's rounding or
  // zero because a branch's contribution was flushed.
  Mask flushed = flushed_mask(Matrix(direct + g.values), dx);
  Mask branch = direct_flushed;
  if (g.flushed.size()) branch = branch || g.flushed;
  flushed = flushed || (branch && dx.array() == 0);
  return Tensor{std::move(dx), x_format_, std::move(flushed)};
}

std::vector<std::pair<Eigen::Index, const Format*>> Residual::saved() const {
  std::vector<std::pair<Eigen::Index, const Format*>> out;
  for (const auto& l : body_)
    for (const auto& s : l->saved()) out.push_back(s);
  return out;
}

}  // namespace rpsim::sim::train
