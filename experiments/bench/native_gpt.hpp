// The GPT of gpt-fp32.json written directly in binary32 Eigen (the native
// side of bench_train_gpt): the same matmul shapes and elementwise ops,
// forward, backward, clipping and AdamW, with none of the rounding, shadow or
// telemetry. A header so that the same source is compiled twice: with the
// project's flags in bench_train_gpt and with -march=native in
// native/native_steps.cpp (the fastest native step on this CPU, issue #30).
#pragma once

#include <Eigen/Core>

#include <cmath>
#include <random>
#include <vector>

#include "native_timing.hpp"

namespace bench_native {

using Mat = Eigen::MatrixXf;
using Col = Eigen::VectorXf;

struct Shape {
  int layers, width, heads, context, batch, vocabulary;
};

// AdamW as gpt-fp32.json sets it.
struct AdamW {
  float lr = 0.002f, b1 = 0.9f, b2 = 0.99f, eps = 1e-8f, decay = 0.1f, min_lr = 0.0002f;
  int warmup = 20, decay_steps = 200;
  float max_grad_norm = 1.0f;
  float lr_at(int t) const {
    if (t < warmup) return lr * float(t + 1) / float(warmup);
    if (t >= decay_steps) return min_lr;
    const float r = float(t - warmup) / float(decay_steps - warmup);
    return min_lr + 0.5f * (1 + std::cos(float(M_PI) * r)) * (lr - min_lr);
  }
};

struct Param {
  Mat w, g, m, v;
  bool decay;  // matrices only, as nanoGPT's configure_optimizers
};

// LayerNorm over each row (eps 1e-5); xhat and 1/std kept for backward.
struct Norm {
  Mat xhat;
  Col rstd;  // one per row
  Mat forward(const Mat& x, const Param& g, const Param& b) {
    const Col mean = x.rowwise().mean();
    xhat = x.colwise() - mean;
    rstd = (xhat.array().square().rowwise().mean() + 1e-5f).rsqrt().matrix();
    xhat.array().colwise() *= rstd.array();
    return ((xhat.array().rowwise() * g.w.row(0).array()).rowwise() + b.w.row(0).array()).matrix();
  }
  Mat backward(const Mat& dy, Param& g, Param& b) const {
    g.g += (dy.array() * xhat.array()).colwise().sum().matrix();
    b.g += dy.colwise().sum();
    const Mat dxhat = (dy.array().rowwise() * g.w.row(0).array()).matrix();
    const Col m1 = dxhat.rowwise().mean();
    const Col m2 = (dxhat.array() * xhat.array()).rowwise().mean();
    const Mat centred = (dxhat.colwise() - m1) - (xhat.array().colwise() * m2.array()).matrix();
    return (centred.array().colwise() * rstd.array()).matrix();
  }
};

inline Mat linear(const Mat& x, const Param& w, const Param& b) {
  return (x * w.w).rowwise() + b.w.row(0);
}
// Accumulates the weight and bias gradients; returns the input's.
inline Mat linear_backward(const Mat& dy, const Mat& x, Param& w, Param& b) {
  w.g.noalias() += x.transpose() * dy;
  b.g += dy.colwise().sum();
  return dy * w.w.transpose();
}

// GELU with erf, as rpsim's (activations.cpp), and its derivative.
inline float gelu(float x) {
  return 0.5f * x * (1 + std::erf(x * float(M_SQRT1_2)));
}
inline float gelu_derivative(float x) {
  return 0.5f * (1 + std::erf(x * float(M_SQRT1_2))) + x * 0.3989422804f * std::exp(-0.5f * x * x);
}

// Multi-head causal self-attention over windows of `t` rows of qkv (q, k,
// v side by side, each `heads` blocks of d columns), one head at a time as
// rpsim does; the probabilities are kept for backward.
struct Attention {
  int t, heads;
  std::vector<Mat> p;  // per (window, head)
  Mat forward(const Mat& qkv) {
    const int n = int(qkv.cols()) / 3, d = n / heads, windows = int(qkv.rows()) / t;
    const float scale = 1 / std::sqrt(float(d));
    p.assign(std::size_t(windows * heads), Mat());
    Mat y(qkv.rows(), n);
    for (int r = 0; r < windows; ++r)
      for (int h = 0; h < heads; ++h) {
        Mat s = qkv.block(r * t, h * d, t, d) * qkv.block(r * t, n + h * d, t, d).transpose() * scale;
        for (int i = 0; i < t; ++i) {
          const float m = s.row(i).head(i + 1).maxCoeff();
          s.row(i).head(i + 1) = (s.row(i).head(i + 1).array() - m).exp().matrix();
          s.row(i).head(i + 1) /= s.row(i).head(i + 1).sum();
          s.row(i).tail(t - i - 1).setZero();  // the future, masked
        }
        y.block(r * t, h * d, t, d) = s * qkv.block(r * t, 2 * n + h * d, t, d);
        p[std::size_t(r * heads + h)] = std::move(s);
      }
    return y;
  }
  Mat backward(const Mat& dy, const Mat& qkv) const {
    const int n = int(qkv.cols()) / 3, d = n / heads, windows = int(qkv.rows()) / t;
    const float scale = 1 / std::sqrt(float(d));
    Mat dqkv(qkv.rows(), qkv.cols());
    for (int r = 0; r < windows; ++r)
      for (int h = 0; h < heads; ++h) {
        const Mat& s = p[std::size_t(r * heads + h)];
        const auto g = dy.block(r * t, h * d, t, d);
        const Mat dp = g * qkv.block(r * t, 2 * n + h * d, t, d).transpose();
        dqkv.block(r * t, 2 * n + h * d, t, d) = s.transpose() * g;
        const Col dot = (dp.array() * s.array()).rowwise().sum();
        const Mat ds = (s.array() * (dp.colwise() - dot).array()).matrix() * scale;
        dqkv.block(r * t, h * d, t, d) = ds * qkv.block(r * t, n + h * d, t, d);
        dqkv.block(r * t, n + h * d, t, d) = ds.transpose() * qkv.block(r * t, h * d, t, d);
      }
    return dqkv;
  }
};

// One block's saved activations.
struct Block {
  Norm ln1, ln2;
  Attention attn;
  Mat a1, qkv, att, a2, fc, gl;
};

// The GPT in native binary32, initialised as nanoGPT (gpt.cpp): parameters
// in params_, in the constructor's order (P() names a block's).
class NativeGpt {
 public:
  NativeGpt(const Shape& s, unsigned seed) : s_(s) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal;
    const int n = s.width;
    // std > 0: N(0, std^2); 0: zeros (biases); < 0: ones (LayerNorm gains).
    auto add = [&](int rows, int cols, float std) {
      Param p{Mat::Zero(rows, cols), Mat::Zero(rows, cols), Mat::Zero(rows, cols), Mat::Zero(rows, cols),
              rows > 1};
      if (std > 0) p.w = p.w.unaryExpr([&](float) { return std * normal(gen); });
      if (std < 0) p.w.setOnes();
      params_.push_back(std::move(p));
    };
    add(s.vocabulary, n, 0.02f);  // wte, tied to the output head
    add(s.context, n, 0.02f);     // wpe
    const float proj = 0.02f / std::sqrt(2.0f * float(s.layers));
    for (int l = 0; l < s.layers; ++l) {
      add(1, n, -1), add(1, n, 0), add(n, 3 * n, 0.02f), add(1, 3 * n, 0), add(n, n, proj), add(1, n, 0);
      add(1, n, -1), add(1, n, 0), add(n, 4 * n, 0.02f), add(1, 4 * n, 0), add(4 * n, n, proj), add(1, n, 0);
    }
    add(1, n, -1), add(1, n, 0);  // ln_f
    blocks_.resize(std::size_t(s.layers),
                   Block{{}, {}, Attention{s.context, s.heads, {}}, {}, {}, {}, {}, {}, {}});
  }

  // One training step on `tokens` (batch x context, row-major) predicting
  // `targets`; returns the mean cross-entropy before the update.
  float step(const std::vector<int>& tokens, const std::vector<int>& targets) {
    for (Param& p : params_) p.g.setZero();
    const Mat logits = forward(tokens);
    Mat dlogits;
    const float loss = cross_entropy(logits, targets, dlogits);
    backward(tokens, dlogits);
    clip_and_update();
    return loss;
  }

 private:
  // Block l's k-th parameter (the order of the constructor's adds).
  Param& P(int l, int k) { return params_[std::size_t(2 + 12 * l + k)]; }
  Param& ln_f(int k) { return params_[params_.size() - 2 + std::size_t(k)]; }

  Mat forward(const std::vector<int>& tokens) {
    const int rows = int(tokens.size()), t = s_.context;
    Mat x(rows, s_.width);
    for (int r = 0; r < rows; ++r)
      x.row(r) = params_[0].w.row(tokens[std::size_t(r)]) + params_[1].w.row(r % t);
    for (int l = 0; l < s_.layers; ++l) {
      Block& b = blocks_[std::size_t(l)];
      b.a1 = b.ln1.forward(x, P(l, 0), P(l, 1));
      b.qkv = linear(b.a1, P(l, 2), P(l, 3));
      b.att = b.attn.forward(b.qkv);
      x += linear(b.att, P(l, 4), P(l, 5));  // the residuals
      b.a2 = b.ln2.forward(x, P(l, 6), P(l, 7));
      b.fc = linear(b.a2, P(l, 8), P(l, 9));
      b.gl = b.fc.unaryExpr([](float v) { return gelu(v); });
      x += linear(b.gl, P(l, 10), P(l, 11));
    }
    hf_ = ln_f_.forward(x, ln_f(0), ln_f(1));
    return hf_ * params_[0].w.transpose();  // the tied head
  }

  // Softmax cross-entropy (max subtracted), mean over rows; dlogits its
  // derivative.
  static float cross_entropy(const Mat& logits, const std::vector<int>& targets, Mat& dlogits) {
    const Col m = logits.rowwise().maxCoeff();
    dlogits = (logits.colwise() - m).array().exp().matrix();
    const Col sum = dlogits.rowwise().sum();
    dlogits = (dlogits.array().colwise() / sum.array()).matrix();
    float loss = 0;
    for (Eigen::Index r = 0; r < logits.rows(); ++r) {
      const int y = targets[std::size_t(r)];
      loss -= std::log(dlogits(r, y));
      dlogits(r, y) -= 1;
    }
    dlogits /= float(logits.rows());
    return loss / float(logits.rows());
  }

  void backward(const std::vector<int>& tokens, const Mat& dlogits) {
    params_[0].g.noalias() += dlogits.transpose() * hf_;
    Mat dx = ln_f_.backward(dlogits * params_[0].w, ln_f(0), ln_f(1));
    for (int l = s_.layers - 1; l >= 0; --l) {
      Block& b = blocks_[std::size_t(l)];
      const Mat dgl = linear_backward(dx, b.gl, P(l, 10), P(l, 11));
      const Mat dfc =
          (dgl.array() * b.fc.unaryExpr([](float v) { return gelu_derivative(v); }).array()).matrix();
      dx += b.ln2.backward(linear_backward(dfc, b.a2, P(l, 8), P(l, 9)), P(l, 6), P(l, 7));
      const Mat dqkv = b.attn.backward(linear_backward(dx, b.att, P(l, 4), P(l, 5)), b.qkv);
      dx += b.ln1.backward(linear_backward(dqkv, b.a1, P(l, 2), P(l, 3)), P(l, 0), P(l, 1));
    }
    for (Eigen::Index r = 0; r < dx.rows(); ++r) {
      params_[0].g.row(tokens[std::size_t(r)]) += dx.row(r);
      params_[1].g.row(r % s_.context) += dx.row(r);
    }
  }

  // Gradient-norm clipping over all parameters, then AdamW.
  void clip_and_update() {
    double sq = 0;
    for (const Param& p : params_) sq += double(p.g.squaredNorm());
    const float norm = float(std::sqrt(sq));
    const float clip = norm > opt_.max_grad_norm ? opt_.max_grad_norm / (norm + 1e-6f) : 1.0f;
    ++t_;
    const float lr = opt_.lr_at(t_ - 1);
    const float c1 = 1 - std::pow(opt_.b1, float(t_)), c2 = 1 - std::pow(opt_.b2, float(t_));
    for (Param& p : params_) {
      p.g *= clip;
      p.m = opt_.b1 * p.m + (1 - opt_.b1) * p.g;
      p.v = opt_.b2 * p.v + (1 - opt_.b2) * p.g.cwiseAbs2();
      if (p.decay) p.w *= 1 - lr * opt_.decay;
      p.w.array() -= lr * (p.m.array() / c1) / ((p.v.array() / c2).sqrt() + opt_.eps);
    }
  }

  Shape s_;
  AdamW opt_;
  std::vector<Param> params_;
  std::vector<Block> blocks_;
  Norm ln_f_;
  Mat hf_;
  int t_ = 0;
};

// A fixed batch of random tokens; targets are the next token of a random
// stream, as the text windows are.
struct Batch {
  std::vector<int> tokens, targets;
  explicit Batch(const Shape& s) {
    std::mt19937 gen(7);
    std::uniform_int_distribution<int> id(0, s.vocabulary - 1);
    const std::size_t rows = std::size_t(s.batch * s.context);
    for (std::size_t r = 0; r < rows; ++r) tokens.push_back(id(gen));
    for (std::size_t r = 0; r < rows; ++r)
      targets.push_back((r + 1) % std::size_t(s.context) ? tokens[r + 1] : id(gen));
  }
};

// CPU seconds per step on one fixed batch.
inline double gpt_seconds_per_step(const Shape& s, int steps, int repeats) {
  NativeGpt net(s, 1);
  const Batch batch(s);
  return seconds_per_step([&] { return net.step(batch.tokens, batch.targets); }, steps, repeats);
}

}  // namespace bench_native
