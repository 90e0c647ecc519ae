// The tied output projection.
#include <stdexcept>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

LMHead::LMHead(std::string name, std::string embedding)
    : Layer(std::move(name)), embedding_(std::move(embedding)) {}

void LMHead::link(std::vector<std::unique_ptr<Layer>>& layers) {
  weight_ = nullptr;
  for (auto& l : layers)
    if (l->name() == embedding_)
      if (auto* e = dynamic_cast<Embedding*>(l.get())) {
        e->set_tied(true);
        weight_ = &e->token;
      }
  if (!weight_) throw std::invalid_argument(name() + ": no embedding layer named " + embedding_);
}

Tensor LMHead::forward(const Tensor& x, const StepContext& ctx) {
  const OpRule& rule = ctx.policy->rule("lm_head");
  const Formats f = resolve(rule, *x.format);
  x_format_ = x.format;
  compute_ = f.compute;
  xc_ = rounded(*f.compute, x.values);
  wc_ = rounded(*f.compute, weight_->value);
  Matrix y = matmul_nt(xc_, wc_, rule.accumulation, matmul_stream(name(), ctx, 0));
  round_in_place(rule.accumulation.output_format(), y);
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor LMHead::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  const PrecisionPolicy& pol = *ctx.policy;
  const OpRule& rule = pol.rule("lm_head");
  const Formats f = resolve(rule, *x_format_);
  const Format& accf = rule.accumulation.output_format();
  const Matrix d = rounded(*f.backward, dy.values);
  Matrix dw = matmul_tn(d, xc_, rule.accumulation, matmul_stream(name(), ctx, 1));
  const Matrix dw_raw = dw;
  round_in_place(accf, dw);
  round_in_place(*f.output, dw);
  round_in_place(*pol.gradients, dw);
  weight_->grad_underflow = count_flushed(dw_raw, dw);
  weight_->grad = std::move(dw);
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  Matrix dx = matmul(d, wc_, rule.accumulation, matmul_stream(name(), ctx, 2));
  const Matrix raw = dx;
  round_in_place(accf, dx);
  round_in_place(*f.output, dx);
  round_in_place(*x_format_, dx);
  Mask flushed = flushed_mask(raw, dx);
  return Tensor{std::move(dx), x_format_, std::move(flushed)};
}

std::vector<std::pair<Eigen::Index, const Format*>> LMHead::saved() const {
  return {{xc_.size(), compute_}};
}

}  // namespace rpsim::sim::train
