// The 784-256-256-10 MLP step in native binary32 Eigen (the native side of
// bench_train). A header so that the same source is compiled twice: with the
// project's flags in bench_train and with -march=native in
// native/native_steps.cpp (the fastest native step on this CPU, issue #30).
#pragma once

#include <Eigen/Core>

#include <cmath>
#include <vector>

#include "native_timing.hpp"

namespace bench_native {

using MatrixF = Eigen::MatrixXf;

// The same model in native binary32: forward, softmax cross-entropy,
// backward, SGD with momentum.
struct NativeMlp {
  std::vector<MatrixF> w, b, vw, vb;
  NativeMlp() {
    const int dims[] = {784, 256, 256, 10};
    for (int l = 0; l < 3; ++l) {
      w.push_back(MatrixF::Random(dims[l], dims[l + 1]) / std::sqrt(float(dims[l])));
      b.push_back(MatrixF::Random(1, dims[l + 1]) / std::sqrt(float(dims[l])));
      vw.push_back(MatrixF::Zero(dims[l], dims[l + 1]));
      vb.push_back(MatrixF::Zero(1, dims[l + 1]));
    }
  }
  float step(const MatrixF& x, const std::vector<int>& labels, float lr, float momentum) {
    std::vector<MatrixF> acts{x};
    for (int l = 0; l < 3; ++l) {
      MatrixF z = acts.back() * w[l];
      z.rowwise() += b[l].row(0);
      if (l < 2) z = z.cwiseMax(0.0f);
      acts.push_back(std::move(z));
    }
    MatrixF p = acts.back();
    float loss = 0;
    for (int i = 0; i < p.rows(); ++i) {
      const float m = p.row(i).maxCoeff();
      p.row(i) = (p.row(i).array() - m).exp();
      const float s = p.row(i).sum();
      p.row(i) /= s;
      loss -= std::log(p(i, labels[std::size_t(i)]));
      p(i, labels[std::size_t(i)]) -= 1.0f;
    }
    MatrixF d = p / float(p.rows());
    for (int l = 2; l >= 0; --l) {
      const MatrixF gw = acts[std::size_t(l)].transpose() * d;
      const MatrixF gb = d.colwise().sum();
      if (l > 0)
        d = ((d * w[std::size_t(l)].transpose()).array() * (acts[std::size_t(l)].array() > 0).cast<float>())
                .matrix();
      vw[std::size_t(l)] = momentum * vw[std::size_t(l)] + gw;
      vb[std::size_t(l)] = momentum * vb[std::size_t(l)] + gb;
      w[std::size_t(l)] -= lr * vw[std::size_t(l)];
      b[std::size_t(l)] -= lr * vb[std::size_t(l)];
    }
    return loss / float(p.rows());
  }
};

// CPU seconds per step on one fixed batch of `batch` random rows.
inline double mlp_seconds_per_step(int batch, int steps, int repeats) {
  NativeMlp net;
  const MatrixF x = MatrixF::Random(batch, 784);
  std::vector<int> labels(static_cast<std::size_t>(batch));
  for (int i = 0; i < batch; ++i) labels[std::size_t(i)] = i % 10;
  return seconds_per_step([&] { return net.step(x, labels, 0.05f, 0.9f); }, steps, repeats);
}

}  // namespace bench_native
