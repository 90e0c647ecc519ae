// Counting the candidates of the --infer search on samples of D
// (gemm_infer_rank.hpp).
#include "gemm_infer_rank.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "gemm_infer_check.hpp"

namespace rpsim::sim::infer_detail {

namespace {

std::vector<Eigen::Index> spaced(Eigen::Index n, Eigen::Index want) {
  std::vector<Eigen::Index> idx;
  const Eigen::Index m = std::min(n, std::max<Eigen::Index>(want, 1));
  for (Eigen::Index t = 0; t < m; ++t) idx.push_back((t * n) / m + (n / m) / 2);
  return idx;
}

}  // namespace

Sample sample_of(const GemmDump& dump, std::size_t count) {
  const auto side = static_cast<Eigen::Index>(std::ceil(std::sqrt(static_cast<double>(count))));
  const auto rows = spaced(dump.d.rows(), side);
  const auto cols = spaced(dump.d.cols(), (static_cast<Eigen::Index>(count) + side - 1) / side);
  Sample s;
  s.a = dump.a(rows, Eigen::all);
  s.b = dump.b(Eigen::all, cols);
  s.d = dump.d(rows, cols);
  s.c = dump.c ? Matrix((*dump.c)(rows, cols)) : Matrix::Zero(s.d.rows(), s.d.cols());
  return s;
}

std::size_t score(const KernelSchedule& s, const Sample& smp) {
  const Matrix got = gemm(AccumulationModel(s), smp.a, smp.b, smp.c);
  std::size_t pass = 0;
  for (Eigen::Index i = 0; i < got.size(); ++i)
    pass += same_encoding(smp.d.data()[i], got.data()[i], s.output);
  return pass;
}

void score_all(std::vector<Candidate>& cands, const Sample& smp, int threads, std::size_t Candidate::*into) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads > 0 ? threads : 1)
  for (std::size_t i = 0; i < cands.size(); ++i) cands[i].*into = score(cands[i].schedule, smp);
}

void screen_all(std::vector<Candidate>& cands, const Sample& smp, int threads, std::size_t keep) {
  Sample first;
  first.a = smp.a.topRows(1);
  first.b = smp.b.leftCols(1);
  first.c = smp.c.topLeftCorner(1, 1);
  first.d = smp.d.topLeftCorner(1, 1);
  std::vector<char> hit(cands.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads > 0 ? threads : 1)
  for (std::size_t i = 0; i < cands.size(); ++i) hit[i] = score(cands[i].schedule, first) == 1;
  std::vector<Candidate> hits;
  for (std::size_t i = 0; i < cands.size(); ++i)
    if (hit[i]) hits.push_back(cands[i]);
  score_all(hits, smp, threads, &Candidate::sample_pass);
  const auto total = std::size_t(smp.d.size());
  const auto perfect =
      std::count_if(hits.begin(), hits.end(), [&](const Candidate& c) { return c.sample_pass == total; });
  const bool rank_all = std::size_t(perfect) < keep;
  std::vector<Candidate> rest;
  for (std::size_t i = 0; i < cands.size() && rank_all; ++i)
    if (!hit[i]) rest.push_back(cands[i]);
  score_all(rest, smp, threads, &Candidate::sample_pass);
  for (std::size_t i = 0, h = 0, r = 0; i < cands.size(); ++i)
    cands[i].sample_pass = hit[i] ? hits[h++].sample_pass : rank_all ? rest[r++].sample_pass : 0;
}

}  // namespace rpsim::sim::infer_detail
