// The Tensor Core GEMM's kernels (issue #30) against the scalar reference:
// every element of gemm() under every block-FMA instruction preset is
// tensor_core_dot() on its row and column (the per-element model), and the
// AVX-512 tile kernel gives the portable chain's bits under kernel
// schedules (split-K, promotion, decreasing K, the epilogue) and fold
// groups. Random shapes (partial tiles of eight columns), narrow and wide
// exponent ranges, zeros of both signs, subnormals, overflowing sums, and
// non-finite C and operands.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "shared_data.hpp"

namespace {

using rpsim::Format;
using rpsim::sim::AccumulationModel;
using rpsim::sim::KernelSchedule;
using rpsim::sim::Matrix;
using rpsim::sim::TensorCoreModel;

// A value of f: a signed zero, a subnormal, a normal with its exponent in
// [-span, span] (clamped to f's range), or one near f's largest.
double value_of(const Format& f, int span, std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 16);
  const double sign = rng() % 2 ? -1.0 : 1.0;
  if (kind == 0) return sign * 0.0;
  std::uniform_real_distribution<double> frac(1, 2);
  if (kind == 1 && f.subnormals)
    return sign * std::ldexp(double(1 + rng() % ((1ull << f.man_bits) - 1 + 1)), f.emin - f.man_bits) / 2;
  if (kind == 2) return sign * std::ldexp(frac(rng), f.emax);
  const int lo = std::max(-span, f.emin), hi = std::min(span, f.emax);
  std::uniform_int_distribution<int> e(lo, hi);
  return sign * std::ldexp(frac(rng), e(rng));
}

Matrix random_matrix(Eigen::Index r, Eigen::Index c, const Format& f, int span, std::mt19937_64& rng) {
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = value_of(f, span, rng);
  return rpsim::sim::round_to_format(m, f);
}

bool same_bits(double u, double v) {
  return (std::isnan(u) && std::isnan(v)) || (u == v && std::signbit(u) == std::signbit(v));
}

std::size_t mismatches(const Matrix& x, const Matrix& y) {
  std::size_t bad = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) bad += !same_bits(x.data()[i], y.data()[i]);
  return bad;
}

// Every block-FMA instruction preset without block scales.
std::vector<TensorCoreModel> block_fma_presets() {
  std::vector<TensorCoreModel> out;
  const Format inputs[] = {rpsim::formats::binary16(), rpsim::formats::bfloat16(), rpsim::formats::tf32(),
                           rpsim::formats::e4m3(), rpsim::formats::e5m2()};
  const Format outputs[] = {rpsim::formats::binary32(), rpsim::formats::binary16()};
  for (const auto& gpu : rpsim::sim::tensor_core_preset_names())
    for (const char* kind : {"", "wgmma"})
      for (const auto& in : inputs)
        for (const auto& acc : outputs) {
          try {
            auto m = rpsim::sim::tensor_core_preset(gpu, in, acc, kind);
            if (m.datapath == rpsim::sim::Datapath::block_fma && m.scale_block == 0) out.push_back(m);
          } catch (const std::invalid_argument&) {
            // not an instruction of this GPU
          }
        }
  return out;
}

// Operands for one trial: C values of the output format, some trials with
// an infinity or NaN in C or an infinity in A.
struct Trial {
  Matrix a, b, c;
};

Trial trial_of(const TensorCoreModel& m, int t, std::mt19937_64& rng) {
  const int span = t % 3 == 0 ? 2 : t % 3 == 1 ? 12 : 400;  // narrow, moderate, the whole range
  const auto rows = Eigen::Index(1 + rng() % 11), cols = Eigen::Index(1 + rng() % 21),
             k = Eigen::Index(1 + rng() % 150);
  Trial tr{random_matrix(rows, k, m.input, span, rng), random_matrix(k, cols, m.b_input(), span, rng),
           random_matrix(rows, cols, m.output, span + 8, rng)};
  if (t % 5 == 3) tr.c(rng() % rows, rng() % cols) = std::numeric_limits<double>::infinity();
  if (t % 5 == 4) tr.c(rng() % rows, rng() % cols) = std::numeric_limits<double>::quiet_NaN();
  if (t % 7 == 6) tr.a(rng() % rows, rng() % k) = -std::numeric_limits<double>::infinity();
  return tr;
}

}  // namespace

TEST_CASE("gemm kernel: every element is tensor_core_dot under every block-FMA preset",
          "[gemm][tensor_core]") {
  std::mt19937_64 rng(3030);
  const auto models = block_fma_presets();
  REQUIRE(models.size() >= 20);
  std::size_t elements = 0, bad = 0;
  for (const char* isa : {"best", "portable"}) {
    rpsim::sim::set_gemm_isa(std::string(isa) == "best" ? rpsim::ArrayIsa::best : rpsim::ArrayIsa::portable);
    for (const auto& m : models)
      for (int t = 0; t < 12; ++t) {
        const Trial tr = trial_of(m, t, rng);
        const Matrix d = rpsim::sim::gemm(AccumulationModel(m), tr.a, tr.b, tr.c);
        std::vector<double> row(static_cast<std::size_t>(tr.a.cols()));
        for (Eigen::Index i = 0; i < d.rows(); ++i) {
          for (Eigen::Index q = 0; q < tr.a.cols(); ++q) row[std::size_t(q)] = tr.a(i, q);
          for (Eigen::Index j = 0; j < d.cols(); ++j) {
            const double want = rpsim::sim::tensor_core_dot(
                m, row, std::span<const double>(tr.b.col(j).data(), row.size()), tr.c(i, j));
            ++elements;
            if (!same_bits(d(i, j), want)) {
              ++bad;
              UNSCOPED_INFO(m.name << " (" << isa << ") trial " << t << " element " << i << "," << j
                                   << ": gemm " << d(i, j) << ", tensor_core_dot " << want);
            }
          }
        }
        REQUIRE(bad == 0);
      }
  }
  rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::best);
  CHECK(elements > 20000);
}

TEST_CASE("gemm kernel: the AVX-512 tile kernel gives the portable bits under kernel schedules",
          "[gemm][kernel_schedule]") {
  rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::best);
  if (std::string(rpsim::sim::gemm_kernel_isa()) != "avx512")
    RPSIM_SKIP("this CPU has no AVX-512: the portable chain is the only GEMM kernel");
  std::mt19937_64 rng(3031);
  const char* specs[] = {"kernel:h100:binary16:binary32:split_k=3",
                         "kernel:h100:bfloat16:binary32:split_k=2:reduction=pairwise",
                         "kernel:h100:e4m3:binary32:wgmma:promotion=2",
                         "kernel:h100:binary16:binary32:split_k=4:k_order=decreasing",
                         "kernel:h100:binary16:binary16:c_placement=epilogue",
                         "kernel:a100:tf32:binary32:split_k=2:split_tile=32",
                         "kernel:b200:e5m2:binary32:promotion=1"};
  int compared = 0;
  for (const char* spec : specs)
    for (int t = 0; t < 10; ++t) {
      INFO(spec << " trial " << t);
      const auto s = std::get<KernelSchedule>(AccumulationModel::parse(spec).variant());
      Trial tr = trial_of(s.instruction, t, rng);
      tr.a = random_matrix(tr.a.rows(), 64 * (1 + t % 5) + t, s.stored, t % 2 ? 3 : 60, rng);
      tr.b = random_matrix(tr.a.cols(), tr.c.cols(), s.stored, t % 2 ? 3 : 60, rng);
      rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::avx512);
      const Matrix fast =
          rpsim::sim::gemm(AccumulationModel(s), tr.a, tr.b, tr.c, rpsim::sim::GemmOptions{2});
      KernelSchedule other = s;
      other.output_rounding = rpsim::RoundingMode::toward_zero;
      const auto group = rpsim::sim::gemm_fold_group({s, other}, tr.a, tr.b, tr.c);
      rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::portable);
      const Matrix slow = rpsim::sim::gemm(AccumulationModel(s), tr.a, tr.b, tr.c);
      const Matrix slow_other = rpsim::sim::gemm(AccumulationModel(other), tr.a, tr.b, tr.c);
      rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::best);
      CHECK(mismatches(fast, slow) == 0);
      CHECK(mismatches(group[0], slow) == 0);
      CHECK(mismatches(group[1], slow_other) == 0);
      ++compared;
    }
  CHECK(compared == 70);
}
