// The early-stopping check of gemm_infer_check.hpp.
#include "gemm_infer_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "rpsim/accumulation/gemm.hpp"

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

std::vector<bool> reproduce_all(const std::vector<KernelSchedule>& s, const Matrix& a, const Matrix& b,
                                const Matrix* c, const Matrix& d, int threads) {
  std::vector<bool> ok(s.size(), true);
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < s.size(); ++i) groups[fold_group_key(s[i])].push_back(i);
  for (auto& [key, alive] : groups) {
    Eigen::Index block = 4;
    for (Eigen::Index r0 = 0; r0 < d.rows() && !alive.empty();
         r0 += block, block = std::min<Eigen::Index>(2 * block, 32)) {
      const Eigen::Index len = std::min(block, d.rows() - r0);
      const Matrix cb = c ? Matrix(c->middleRows(r0, len)) : Matrix::Zero(len, d.cols());
      std::vector<KernelSchedule> group;
      for (std::size_t m : alive) group.push_back(s[m]);
      const auto got = gemm_fold_group(group, a.middleRows(r0, len), b, cb, GemmOptions{threads});
      std::vector<std::size_t> next;
      for (std::size_t g = 0; g < group.size(); ++g) {
        bool same = true;
        for (Eigen::Index j = 0; j < d.cols() && same; ++j)
          for (Eigen::Index i = 0; i < len && same; ++i)
            same = same_encoding(d(r0 + i, j), got[g](i, j), group[g].output);
        if (same)
          next.push_back(alive[g]);
        else
          ok[alive[g]] = false;
      }
      alive = std::move(next);
    }
  }
  return ok;
}

}  // namespace rpsim::sim
