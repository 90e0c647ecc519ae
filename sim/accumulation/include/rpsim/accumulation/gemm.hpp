// GEMM D = A*B + C under an accumulation model, per output element over K.
// Matrices are Eigen matrices of doubles holding exactly representable values
// of the model's input format (A, B) and output format (C); round_to_format
// prepares them.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic>;

struct GemmOptions {
  int threads = 1;  // OpenMP threads over output rows; results do not depend on it
};

// D = A*B + C. Throws std::invalid_argument naming the mismatched dimensions.
// Element (i, j) uses stream i*N + j for stochastic rounding.
Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b, const Matrix& c,
            const GemmOptions& options = {});
// D = A*B (C = 0).
Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b,
            const GemmOptions& options = {});

// D under each kernel schedule of `group`, schedules that run the same chunk
// chains (instruction, input conversion, chunks, K order, C placement) and
// differ only in how the chunk results are folded (promotion and reduction
// rounding, reduction order and format, output format and rounding): each
// chain runs once for the whole group (gemm-check --infer's variations).
// The same bits as gemm() under each. Throws std::invalid_argument naming a
// schedule whose chains differ from the first's.
// Schedules with the same key run the same chains: a fold group.
std::string fold_group_key(KernelSchedule s);
std::vector<Matrix> gemm_fold_group(const std::vector<KernelSchedule>& group, const Matrix& a,
                                    const Matrix& b, const Matrix& c, const GemmOptions& options = {});

// Every element rounded to `fmt` (NaN/inf kept as IEEE doubles). Stochastic
// rounding draws counter_random(seed, 0, linear index).
Matrix round_to_format(const Matrix& m, const Format& fmt, RoundingMode mode = RoundingMode::nearest_even,
                       std::uint64_t seed = 0);

}  // namespace rpsim::sim
