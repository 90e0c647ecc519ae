// The optimizers against torch.optim's update written out in the hardware's
// own arithmetic: under fp32 every operation is one binary32 operation (float
// variables here), under fp64 one binary64 operation, so an update computed
// by plain float/double code is the oracle for the policy's one, bit for bit,
// over several steps (state carried), with and without weight decay.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "rpsim/formats/random.hpp"
#include "rpsim/train/optimizer.hpp"

using namespace rpsim;
using namespace rpsim::sim::train;

namespace {

// Values of T in [-1, 1) (as binary64), keyed by stream.
template <class T>
Matrix random_values(Eigen::Index r, Eigen::Index c, std::uint64_t stream) {
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = double(T(double(counter_random(5, stream, std::uint64_t(i)) >> 11) * 0x1.0p-52 - 1.0));
  return m;
}

// torch.optim.SGD (momentum, dampening 0, Nesterov, weight decay added to
// the gradient) and Adam/AdamW (bias corrections as step_size and
// sqrt(bc2); AdamW's decay w * (1 - lr * wd)) on one element, every
// operation in T.
template <class T>
struct Reference {
  const OptimizerConfig& cfg;
  T m = 0, v = 0;
  int t = 0;
  T step(T w, T g, bool decay) {
    const T lr = T(cfg.lr), wd = T(cfg.weight_decay);
    ++t;
    if (cfg.type == "sgd") {
      const T mom = T(cfg.momentum);
      if (decay && cfg.weight_decay != 0) g = g + wd * w;
      if (cfg.momentum != 0) {
        m = t == 1 ? g : mom * m + g;
        g = cfg.nesterov ? g + mom * m : m;
      }
      return w - lr * g;
    }
    const T b1 = T(cfg.betas[0]), b2 = T(cfg.betas[1]);
    T base = w;
    if (decay && cfg.weight_decay != 0 && cfg.type == "adamw") base = w * (T(1) - lr * wd);
    if (decay && cfg.weight_decay != 0 && cfg.type == "adam") g = g + wd * w;
    m = b1 * m + (T(1) - b1) * g;
    v = b2 * v + (T(1) - b2) * (g * g);
    const T bc1 = T(1.0 - std::pow(cfg.betas[0], t)), bc2 = T(1.0 - std::pow(cfg.betas[1], t));
    const T denom = std::sqrt(v) / std::sqrt(bc2) + T(cfg.eps);
    return base - (m / denom) * (lr / bc1);
  }
};

template <class T>
void check_against_reference(const char* policy, const OptimizerConfig& cfg) {
  const PrecisionPolicy p = named_policy(policy);
  Parameter prm{"w", random_values<T>(9, 7, 1), Matrix(), 0, true};
  Parameter bias{"b", random_values<T>(1, 7, 2), Matrix(), 0, false};
  Optimizer opt(cfg, p, 1);
  std::vector<Reference<T>> ref(std::size_t(prm.value.size() + bias.value.size()), Reference<T>{cfg});
  for (int step = 0; step < 4; ++step) {
    prm.grad = random_values<T>(9, 7, 10 + std::uint64_t(step));
    bias.grad = random_values<T>(1, 7, 20 + std::uint64_t(step));
    Matrix expected_w = prm.value, expected_b = bias.value;
    for (Eigen::Index i = 0; i < prm.value.size(); ++i)
      expected_w.data()[i] =
          double(ref[std::size_t(i)].step(T(prm.value.data()[i]), T(prm.grad.data()[i]), true));
    for (Eigen::Index i = 0; i < bias.value.size(); ++i)
      expected_b.data()[i] = double(ref[std::size_t(prm.value.size() + i)].step(
          T(bias.value.data()[i]), T(bias.grad.data()[i]), false));
    opt.step({&prm, &bias});
    INFO(policy << " " << cfg.type << " momentum " << cfg.momentum << " nesterov " << cfg.nesterov
                << " weight decay " << cfg.weight_decay << ", step " << step);
    bool same = true;
    for (Eigen::Index i = 0; i < prm.value.size(); ++i)
      same &= std::bit_cast<std::uint64_t>(prm.value.data()[i]) ==
              std::bit_cast<std::uint64_t>(expected_w.data()[i]);
    for (Eigen::Index i = 0; i < bias.value.size(); ++i)
      same &= std::bit_cast<std::uint64_t>(bias.value.data()[i]) ==
              std::bit_cast<std::uint64_t>(expected_b.data()[i]);
    CHECK(same);
  }
}

}  // namespace

TEST_CASE("train: SGD and Adam(W) under fp32 and fp64 are torch.optim's update in float and double",
          "[train]") {
  const OptimizerConfig configs[] = {
      {"sgd", 0.05, 0.0, 0.0, false, {0.9, 0.999}, 1e-8},
      {"sgd", 0.05, 0.9, 0.0, false, {0.9, 0.999}, 1e-8},
      {"sgd", 0.05, 0.9, 0.01, true, {0.9, 0.999}, 1e-8},
      {"adam", 0.002, 0.0, 0.0, false, {0.9, 0.99}, 1e-8},
      {"adam", 0.002, 0.0, 0.1, false, {0.9, 0.99}, 1e-8},
      {"adamw", 0.002, 0.0, 0.1, false, {0.9, 0.99}, 1e-8},
  };
  for (const OptimizerConfig& cfg : configs) {
    check_against_reference<float>("fp32", cfg);
    check_against_reference<double>("fp64", cfg);
  }
}
