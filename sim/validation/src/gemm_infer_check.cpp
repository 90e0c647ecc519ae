// The early-stopping check of gemm_infer_check.hpp.
#include "gemm_infer_check.hpp"

#include <algorithm>

#include "rpsim/accumulation/gemm.hpp"

namespace rpsim::sim {

bool reproduces(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix* c, const Matrix& d,
                int threads) {
  const AccumulationModel model(s);
  Eigen::Index block = 4;
  for (Eigen::Index r0 = 0; r0 < d.rows(); r0 += block, block = std::min<Eigen::Index>(2 * block, 32)) {
    const Eigen::Index len = std::min(block, d.rows() - r0);
    const Matrix cb = c ? Matrix(c->middleRows(r0, len)) : Matrix::Zero(len, d.cols());
    const Matrix got = gemm(model, a.middleRows(r0, len), b, cb, GemmOptions{threads});
    for (Eigen::Index j = 0; j < got.cols(); ++j)
      for (Eigen::Index i = 0; i < len; ++i)
        if (!same_encoding(d(r0 + i, j), got(i, j), s.output)) return false;
  }
  return true;
}

}  // namespace rpsim::sim
