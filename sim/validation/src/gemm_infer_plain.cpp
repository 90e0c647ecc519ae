// The plain-model half of the --infer search (gemm_infer_plain.hpp). A dump
// from a CPU BLAS, a reference loop or PyTorch's FP32 SGEMM with
// allow_tf32=False is no Tensor Core schedule: it scored 2786/16384 at best
// when the search held only those (issue 26).
#include "gemm_infer_plain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "rpsim/accumulation/gemm.hpp"

namespace rpsim::sim {

namespace {

struct Plain {
  std::string spec;                     // the AccumulationModel (parsed where it is used)
  Format format;                        // the format its sum is in
  bool reverse = false;                 // K summed from its last index down
  std::optional<RoundingMode> to_tf32;  // binary32 inputs converted to tf32 first
};

// The names a user writes for --model (sequential:fp32:rne, exact:binary32):
// accumulator formats by their short names, the exact model's default
// rounding left out. parse() reads them as the canonical specs.
std::string short_name(const Format& f) {
  if (f == formats::binary32()) return "fp32";
  if (f == formats::binary16()) return "fp16";
  if (f == formats::bfloat16()) return "bf16";
  return f.name;
}

// Block sizes of the blocked candidates: the powers of two from 8 to 256
// below K (BLAS kernels block K in such sizes).
std::vector<Plain> plain_models(const Format& stored, const Format& output, Eigen::Index k) {
  std::vector<Format> accs{output};
  if (output != formats::binary32()) accs.push_back(formats::binary32());
  std::vector<std::pair<std::string, Format>> models{{fmt::format("exact:{}", output.name), output}};
  for (const auto& acc : accs) {
    const std::string name = short_name(acc);
    for (const char* kind : {"sequential", "fma", "pairwise"})
      models.emplace_back(fmt::format("{}:{}:rne", kind, name), acc);
    for (int block = 8; block <= 256 && block < k; block *= 2)
      models.emplace_back(fmt::format("blocked:{}:{}:rne", block, name), acc);
    models.emplace_back(fmt::format("kahan:{}:rne", name), acc);
  }
  std::vector<std::optional<RoundingMode>> inputs{std::nullopt};
  if (stored == formats::binary32())
    for (auto m : {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero})
      inputs.emplace_back(m);
  std::vector<Plain> out;
  for (const auto& in : inputs)
    for (const auto& [spec, format] : models)
      for (bool reverse : {false, true}) {
        if (reverse && spec.rfind("exact:", 0) == 0) continue;  // one rounding: no order
        out.push_back({spec, format, reverse, in});
      }
  return out;
}

std::string note_of(const Plain& p, const Format& output) {
  std::vector<std::string> notes;
  if (p.reverse) notes.emplace_back("K in decreasing order");
  if (p.to_tf32) notes.push_back(fmt::format("inputs rounded to tf32 ({})", rounding_name(*p.to_tf32)));
  if (p.format != output)
    notes.push_back(fmt::format("the {} sum rounded to {} (rne)", p.format.name, output.name));
  return fmt::format("{}", fmt::join(notes, "; "));
}

Matrix rounded(const Matrix& m, const Format& f, RoundingMode mode) {
  Matrix r(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.size(); ++i) r.data()[i] = to_double(f, round_double(f, m.data()[i], mode));
  return r;
}

// D under `p` on operands a (M x K), b (K x N), c against d.
InferredSchedule score(const Plain& p, const Matrix& a, const Matrix& b, const Matrix& c, const Matrix& d,
                       const Format& output, int threads) {
  Matrix x = p.to_tf32 ? rounded(a, formats::tf32(), *p.to_tf32) : a;
  Matrix y = p.to_tf32 ? rounded(b, formats::tf32(), *p.to_tf32) : b;
  if (p.reverse) {
    x = Matrix(x.rowwise().reverse());
    y = Matrix(y.colwise().reverse());
  }
  const AccumulationModel model = AccumulationModel::parse(p.spec);
  Matrix got = gemm(model, x, y, c, GemmOptions{threads});
  if (model.output_format() != output) got = rounded(got, output, RoundingMode::nearest_even);
  InferredSchedule s;
  s.spec = p.spec;
  s.note = note_of(p, output);
  double sum = 0;
  for (Eigen::Index i = 0; i < d.size(); ++i) {
    const double want = d.data()[i], have = got.data()[i];
    const double u = std::fabs(ulp_difference(want, have, output));
    s.passed += same_encoding(want, have, output);
    s.max_ulps = std::max(s.max_ulps, u);
    sum += u;
  }
  s.total = std::size_t(d.size());
  s.mean_ulps = s.total ? sum / double(s.total) : 0;
  return s;
}

// Whether `p` gives every element of D: `score` on blocks of rows, 4 then
// doubling up to 32, stopped at the first block with a miss (every element is
// its own dot product, so the blocks give the whole GEMM's bits).
bool reproduces(const Plain& p, const Matrix& a, const Matrix& b, const Matrix& c, const Matrix& d,
                const Format& output, int threads) {
  Eigen::Index block = 4;
  for (Eigen::Index r0 = 0; r0 < d.rows(); r0 += block, block = std::min<Eigen::Index>(2 * block, 32)) {
    const Eigen::Index len = std::min(block, d.rows() - r0);
    const InferredSchedule s =
        score(p, a.middleRows(r0, len), b, c.middleRows(r0, len), d.middleRows(r0, len), output, threads);
    if (s.passed != s.total) return false;
  }
  return true;
}

}  // namespace

void infer_plain_models(const GemmDump& dump, const PlainSample& sample, const PlainSample& confirm,
                        const Format& stored, const Format& output, const InferOptions& options,
                        bool exact_pass, PlainPass& pass, InferResult& r) {
  const std::vector<Plain> plain = plain_models(stored, output, dump.a.cols());
  if (exact_pass) {
    // Only the sample-perfect models matter while something may reproduce
    // the dump, and they rank by their index (every perfect score ties): a
    // model missing the sample's first element is left unscored until the
    // second pass needs the whole ranking (issue #30: most plain models miss
    // a Tensor Core dump's first element, and the screen was half of --infer).
    pass.screened.assign(plain.size(), InferredSchedule{});
    pass.scored.assign(plain.size(), false);
#pragma omp parallel for schedule(dynamic, 1) num_threads(options.threads > 0 ? options.threads : 1)
    for (std::size_t i = 0; i < plain.size(); ++i) {
      const auto first = score(plain[i], sample.a.topRows(1), sample.b.leftCols(1),
                               sample.c.topLeftCorner(1, 1), sample.d.topLeftCorner(1, 1), output, 1);
      if (first.passed != first.total) continue;
      pass.screened[i] = score(plain[i], sample.a, sample.b, sample.c, sample.d, output, 1);
      pass.scored[i] = true;
    }
    r.candidates += plain.size();
    pass.order.clear();
    for (std::size_t i = 0; i < plain.size(); ++i)
      if (pass.scored[i] && pass.screened[i].passed == pass.screened[i].total) pass.order.push_back(i);
    pass.perfect = pass.order.size();
  } else {
    // The whole screen ranking: the models the first pass left unscored too.
#pragma omp parallel for schedule(dynamic, 1) num_threads(options.threads > 0 ? options.threads : 1)
    for (std::size_t i = 0; i < plain.size(); ++i)
      if (!pass.scored[i])
        pass.screened[i] = score(plain[i], sample.a, sample.b, sample.c, sample.d, output, 1);
    const auto& screened = pass.screened;
    pass.order.resize(plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) pass.order[i] = i;
    std::stable_sort(pass.order.begin(), pass.order.end(),
                     [&](std::size_t x, std::size_t y) { return ranks_before(screened[x], screened[y]); });
  }
  const Matrix c = dump.c ? *dump.c : Matrix::Zero(dump.d.rows(), dump.d.cols());
  auto whole = [&](std::size_t n) {
    return score(plain[pass.order[n]], dump.a, dump.b, c, dump.d, output, options.threads);
  };
  if (exact_pass) {
    // Those the sample cannot tell from a reproduction: on the confirm
    // sample (a subset of D, so a miss there is a miss on the whole dump),
    // then the whole dump for those still perfect. The ones missed there
    // are checked whole in the second pass only, where they can rank.
    std::vector<InferredSchedule> exact;
    for (std::size_t n = 0; n < pass.perfect && exact.size() < options.max_exact; ++n) {
      const Plain& p = plain[pass.order[n]];
      if (!reproduces(p, confirm.a, confirm.b, confirm.c, confirm.d, output, options.threads) ||
          !reproduces(p, dump.a, dump.b, c, dump.d, output, options.threads))
        continue;
      // Every element bit-exact: 0 ulps each, as `score` would count them.
      const auto total = std::size_t(dump.d.size());
      exact.push_back({p.spec, {}, total, total, 0.0, 0.0, note_of(p, output), ""});
    }
    // Plain models first: the simpler explanation of the same bits.
    r.exact.insert(r.exact.begin(), exact.begin(), exact.end());
    return;
  }
  // Nothing reproduces the dump: the sample-perfect ones (whole, in their
  // screening order, ahead of the schedules in r.best as the ranking's ties
  // go), then the best `top` of the others.
  std::vector<InferredSchedule> ranked;
  for (std::size_t n = 0; n < pass.perfect; ++n) ranked.push_back(whole(n));
  ranked.insert(ranked.end(), r.best.begin(), r.best.end());
  r.best = std::move(ranked);
  for (std::size_t n = pass.perfect; n < pass.order.size() && n < pass.perfect + options.top; ++n)
    r.best.push_back(whole(n));
  std::stable_sort(r.best.begin(), r.best.end(), ranks_before);
  if (r.best.size() > options.top) r.best.resize(options.top);
}

}  // namespace rpsim::sim
