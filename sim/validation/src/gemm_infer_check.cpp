// The early-stopping check of gemm_infer_check.hpp.
#include "gemm_infer_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"

namespace rpsim::sim {

namespace {

bool all_in(const Matrix& m, const Format& f) {
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double x = m.data()[i];
    if (!std::isnan(x) && to_double(f, round_double(f, x, RoundingMode::nearest_even)) != x) return false;
  }
  return true;
}

}  // namespace

// What the values are: A and B of the format with the fewest fraction bits
// that holds them all (bf16 data fits fp16 too), D of fp16 (float16 dumps),
// bf16 or fp32; binary32 inputs are tf32 inputs to be converted.
void value_formats(const GemmDump& dump, InferResult& r, std::vector<RoundingMode>& conversions) {
  conversions = {RoundingMode::nearest_even};
  r.stored = formats::binary32();
  for (const auto& f :
       {formats::e5m2(), formats::e4m3(), formats::bfloat16(), formats::binary16(), formats::tf32()})
    if (all_in(dump.a, f) && all_in(dump.b, f)) {
      r.stored = f;
      break;
    }
  r.input = r.stored;
  if (r.stored == formats::binary32()) {
    if (!all_in(dump.a, formats::binary32()) || !all_in(dump.b, formats::binary32()))
      throw GemmDumpError(
          fmt::format("{}: A or B holds values wider than binary32: no tensor-core input", dump.source));
    r.input = formats::tf32();
    conversions = {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero};
  }
  r.output = dump.d_dtype == "float16" ? formats::binary16() : formats::binary32();
  if (r.output == formats::binary32() && all_in(dump.d, formats::bfloat16())) r.output = formats::bfloat16();
  if (!all_in(dump.d, r.output))
    throw GemmDumpError(
        fmt::format("{}: D holds values that are not {} values", dump.array_source('D'), r.output.name));
}

bool reproduces(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix* c, const Matrix& d,
                int threads) {
  return reproduce_all({s}, a, b, c, d, threads).front();
}

std::vector<bool> reproduce_all(const std::vector<KernelSchedule>& s, const Matrix& a, const Matrix& b,
                                const Matrix* c, const Matrix& d, int threads) {
  std::vector<bool> ok(s.size(), true);
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < s.size(); ++i) groups[fold_group_key(s[i])].push_back(i);
  const Matrix zero = c ? Matrix() : Matrix::Zero(d.rows(), d.cols());
  // Not a structured binding: clang 14 (the sanitizer build's compiler)
  // cannot capture one in the lambda below.
  for (const auto& entry : groups) {
    const std::vector<std::size_t>& members = entry.second;
    std::vector<KernelSchedule> group;
    for (std::size_t m : members) group.push_back(s[m]);
    // Blocks of rows (gemm_kernel.hpp), A and B decoded once: the group
    // stops at the block where its last member misses.
    std::vector<bool> alive(group.size(), true);
    std::size_t left = group.size();
    gemm_fold_group_blocks(group, a, b, c ? *c : zero, GemmOptions{threads},
                           [&](Eigen::Index r0, Eigen::Index len, const std::vector<Matrix>& got) {
                             for (std::size_t g = 0; g < group.size(); ++g) {
                               bool same = alive[g];
                               for (Eigen::Index j = 0; j < d.cols() && same; ++j)
                                 for (Eigen::Index i = r0; i < r0 + len && same; ++i)
                                   same = same_encoding(d(i, j), got[g](i, j), group[g].output);
                               if (alive[g] && !same) {
                                 alive[g] = false;
                                 ok[members[g]] = false;
                                 --left;
                               }
                             }
                             return left > 0;
                           });
  }
  return ok;
}

}  // namespace rpsim::sim
