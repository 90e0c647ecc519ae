// Accumulation models: sequential against a plain float loop, pairwise,
// blocked and Kahan against hand-computed cases and their error bounds,
// stochastic rounding keyed by seed and index, exact accumulation against MPFR.
#include <mpfr.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/error_analysis.hpp"
#include "rpsim/accumulation/exact_accumulator.hpp"
#include "rpsim/accumulation/gemm.hpp"

namespace {

using namespace rpsim;
using namespace rpsim::sim;

std::vector<double> random_vector(std::mt19937_64& rng, std::size_t n, int exp_spread, bool to_float) {
  std::normal_distribution<double> nd(0, 1);
  std::vector<double> v(n);
  for (auto& x : v) {
    x = std::ldexp(nd(rng), static_cast<int>(rng() % static_cast<unsigned>(2 * exp_spread + 1)) - exp_spread);
    if (to_float) x = static_cast<float>(x);
  }
  return v;
}

double exact_abs_dot(const std::vector<double>& a, const std::vector<double>& b) {
  ExactAccumulator acc;
  for (std::size_t i = 0; i < a.size(); ++i) acc.add_product(std::fabs(a[i]), std::fabs(b[i]));
  return acc.value(RoundingMode::up);
}

// 1 + 2^-24 + 2^-24 + 2^-24 as a "dot product" with b = 1.
const std::vector<double> kStagnation{1, std::ldexp(1, -24), std::ldexp(1, -24), std::ldexp(1, -24)};
const std::vector<double> kOnes(4, 1.0);

}  // namespace

TEST_CASE("sequential fp32 equals a plain float loop, fma fp32 equals an fmaf loop", "[accumulation]") {
  std::mt19937_64 rng(1);
  const auto seq = AccumulationModel::parse("sequential:fp32:rne");
  const auto fma = AccumulationModel::parse("fma:fp32");
  for (int rep = 0; rep < 50; ++rep) {
    const auto a = random_vector(rng, 300, 20, true), b = random_vector(rng, 300, 20, true);
    const float c = static_cast<float>(a[0]);
    float s = c, f = c;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const float p = static_cast<float>(a[i]) * static_cast<float>(b[i]);
      s = s + p;
      f = std::fma(static_cast<float>(a[i]), static_cast<float>(b[i]), f);
    }
    CHECK(seq.dot(a, b, c) == static_cast<double>(s));
    CHECK(fma.dot(a, b, c) == static_cast<double>(f));
  }
}

TEST_CASE("sequential with directed rounding (formats core path) brackets the exact value",
          "[accumulation]") {
  // rd/ru/rtz go through ops.hpp rather than native float: rounding every
  // operation down (up) keeps the sum below (above) the exact value.
  std::mt19937_64 rng(2);
  const auto rne = AccumulationModel::parse("sequential:fp32:rne");
  const auto rtz = AccumulationModel::parse("sequential:fp32:rtz");
  const auto rd = AccumulationModel::parse("sequential:fp32:rd");
  const auto ru = AccumulationModel::parse("sequential:fp32:ru");
  for (int rep = 0; rep < 20; ++rep) {
    const auto a = random_vector(rng, 100, 5, true), b = random_vector(rng, 100, 5, true);
    const double x = rne.dot(a, b), lo = rd.dot(a, b), hi = ru.dot(a, b), z = rtz.dot(a, b);
    const double exact = exact_dot(a, b);
    CHECK(lo <= exact);
    CHECK(hi >= exact);
    CHECK(std::fabs(z) <=
          std::fabs(exact) + gamma_n(200, unit_roundoff(formats::binary32(), RoundingMode::toward_zero)) *
                                 exact_abs_dot(a, b));
    CHECK(std::fabs(x - exact) <= gamma_n(100, unit_roundoff(formats::binary32())) * exact_abs_dot(a, b));
  }
}

TEST_CASE("hand-computed cases: sequential, pairwise, blocked, Kahan", "[accumulation]") {
  // Sequential: each 2^-24 is a tie at 1 and rounds back to 1.
  CHECK(AccumulationModel::parse("sequential").dot(kStagnation, kOnes) == 1.0);
  // Pairwise: (1 + 2^-24) + (2^-24 + 2^-24) = 1 + 2^-23.
  CHECK(AccumulationModel::parse("pairwise:fp32").dot(kStagnation, kOnes) == 1 + std::ldexp(1, -23));
  // Blocked, b = 2: blocks give 1 and 2^-23, then 1 + 2^-23; b = 4 is sequential.
  CHECK(AccumulationModel::parse("blocked:2:fp32").dot(kStagnation, kOnes) == 1 + std::ldexp(1, -23));
  CHECK(AccumulationModel::parse("blocked:4:fp32").dot(kStagnation, kOnes) == 1.0);
  // Kahan: s = 1, comp = -2^-24; then y = 2^-23, s = 1 + 2^-23, comp = 0; then
  // 1 + 2^-23 + 2^-24 ties to 1 + 2^-22 (even).
  CHECK(AccumulationModel::parse("kahan:fp32").dot(kStagnation, kOnes) == 1 + std::ldexp(1, -22));
  // Exact: 1 + 3*2^-24 rounded once to binary64 (exact) and to binary32 (tie -> even).
  CHECK(AccumulationModel::parse("exact").dot(kStagnation, kOnes) == 1 + 3 * std::ldexp(1, -24));
  CHECK(AccumulationModel::parse("exact:fp32").dot(kStagnation, kOnes) == 1 + std::ldexp(1, -22));
  // bf16 accumulator (ulp 2^-7 at 1): 1 + 2^-8 + 2^-8 stagnates at 1 under rtz
  // (each 2^-8 is cut), reaches 1 + 2^-7 when rounded once at the end.
  const std::vector<double> bf_terms{1, 0.00390625, 0.00390625}, bf_ones{1, 1, 1};
  CHECK(AccumulationModel::parse("sequential:bf16:rtz").dot(bf_terms, bf_ones) == 1.0);
  CHECK(AccumulationModel::parse("exact:bf16:rtz").dot(bf_terms, bf_ones) == 1 + std::ldexp(1, -7));
  // C joins first.
  CHECK(
      AccumulationModel::parse("sequential:fp16").dot(std::vector<double>{1}, std::vector<double>{2}, 0.5) ==
      2.5);
}

TEST_CASE("summation error bounds hold on random data", "[accumulation]") {
  std::mt19937_64 rng(3);
  const double u = unit_roundoff(formats::binary32());
  for (std::size_t n : {10u, 100u, 1000u}) {
    for (int rep = 0; rep < 5; ++rep) {
      const auto a = random_vector(rng, n, 3, true), b = random_vector(rng, n, 3, true);
      const double exact = exact_dot(a, b);
      const double abs_sum = exact_abs_dot(a, b);
      const double ln = std::ceil(std::log2(static_cast<double>(n)));
      INFO("n = " << n);
      CHECK(std::fabs(AccumulationModel::parse("sequential").dot(a, b) - exact) <= gamma_n(n, u) * abs_sum);
      CHECK(std::fabs(AccumulationModel::parse("fma").dot(a, b) - exact) <= gamma_n(n, u) * abs_sum);
      CHECK(std::fabs(AccumulationModel::parse("pairwise").dot(a, b) - exact) <=
            gamma_n(static_cast<std::size_t>(ln) + 1, u) * abs_sum);
      const std::size_t blk = 32;
      CHECK(std::fabs(AccumulationModel::parse("blocked:32").dot(a, b) - exact) <=
            gamma_n(blk + n / blk + 1, u) * abs_sum);
      // Kahan over rounded products: u per product + (2u + O(n u^2)) of the
      // compensated sum (Higham, ASNA eq. 4.9), + u for the final rounding.
      CHECK(std::fabs(AccumulationModel::parse("kahan").dot(a, b) - exact) <=
            (3 * u + 2 * static_cast<double>(n) * u * u) * abs_sum * (1 + u) + u * std::fabs(exact));
    }
  }
}

TEST_CASE("stochastic rounding: keyed by seed, stream and index, unbiased where RN stagnates",
          "[accumulation]") {
  // 1 + 256 * 2^-9 in bfloat16 (8-bit precision): every addition of 2^-9 to
  // values in [1, 2) is below half an ulp (2^-8): RN stagnates at 1.
  const std::vector<double> a(257, std::ldexp(1, -9));
  std::vector<double> b(257, 1.0);
  std::vector<double> aa = a;
  aa[0] = 1;
  CHECK(AccumulationModel::parse("sequential:bf16:rne").dot(aa, b) == 1.0);
  const auto sr1 = AccumulationModel::parse("sequential:bf16:sr:seed=1");
  const auto sr2 = AccumulationModel::parse("sequential:bf16:sr:seed=2");
  CHECK(sr1.dot(aa, b, 0, 5) == sr1.dot(aa, b, 0, 5));  // reproducible
  double mean = 0;
  int differs = 0;
  for (std::uint64_t s = 0; s < 200; ++s) {
    const double x = sr1.dot(aa, b, 0, s);
    differs += x != sr2.dot(aa, b, 0, s);
    mean += x;
  }
  mean /= 200;
  CHECK(differs > 0);
  CHECK(std::fabs(mean - 1.5) < 0.05);  // exact: 1 + 256 * 2^-9 = 1.5
  CHECK(AccumulationModel::parse("sequential:bf16:sr:seed=9").spec() == "sequential:bfloat16:sr:seed=9");
}

TEST_CASE("exact accumulation agrees with MPFR on long random dot products", "[accumulation][exact]") {
  std::mt19937_64 rng(4);
  mpfr_t sum, prod, x;
  mpfr_inits2(5000, sum, prod, x, static_cast<mpfr_ptr>(nullptr));
  const struct {
    RoundingMode mode;
    mpfr_rnd_t mpfr;
  } modes[] = {{RoundingMode::nearest_even, MPFR_RNDN},
               {RoundingMode::toward_zero, MPFR_RNDZ},
               {RoundingMode::up, MPFR_RNDU},
               {RoundingMode::down, MPFR_RNDD}};
  for (int rep = 0; rep < 30; ++rep) {
    const std::size_t n = 2000;
    // Wide exponents (2^-400 .. 2^400) and cancellation.
    auto a = random_vector(rng, n, 400, false), b = random_vector(rng, n, 400, false);
    if (rep % 3 == 0)
      for (std::size_t i = 0; i + 1 < n; i += 2) {
        a[i + 1] = -a[i];
        b[i + 1] = b[i] * (1 + std::ldexp(1, -50));
      }
    ExactAccumulator acc;
    mpfr_set_zero(sum, 1);
    for (std::size_t i = 0; i < n; ++i) {
      acc.add_product(a[i], b[i]);
      mpfr_set_d(prod, a[i], MPFR_RNDN);
      mpfr_mul_d(prod, prod, b[i], MPFR_RNDN);  // exact: 106 bits << 5000
      mpfr_add(sum, sum, prod, MPFR_RNDN);      // exact: exponent range 2^-1700..2^900 < 5000 bits
    }
    for (const auto& m : modes) {
      const double expected = mpfr_get_d(sum, m.mpfr);
      const double got = acc.value(m.mode);
      INFO("rep " << rep << " mode " << rounding_name(m.mode));
      CHECK(got == expected);
    }
    // Rounded to binary32 and binary16 as well (flags ignored).
    Rounding r;
    Flags f = 0;
    CHECK(to_double(formats::binary32(), acc.round(formats::binary32(), r, f)) ==
          static_cast<double>(mpfr_get_flt(sum, MPFR_RNDN)));
  }
  mpfr_clears(sum, prod, x, static_cast<mpfr_ptr>(nullptr));
}

TEST_CASE("exact accumulator: zeros, signs, extremes", "[accumulation][exact]") {
  ExactAccumulator acc;
  acc.add(-0.0);
  CHECK(std::signbit(acc.value()));
  acc.add(0.0);
  CHECK(!std::signbit(acc.value()));
  acc.clear();
  acc.add(1e300);
  acc.add(1e300);
  acc.add(-1e300);
  CHECK(acc.value() == 1e300);
  acc.clear();
  const double tiny = std::numeric_limits<double>::denorm_min();
  acc.add_product(tiny, tiny);  // 2^-2148: far below binary64, kept exactly
  acc.add(1.0);
  CHECK(acc.value() == 1.0);
  CHECK(acc.value(RoundingMode::up) == std::nextafter(1.0, 2.0));
  acc.add(-1.0);
  CHECK(acc.value() == 0.0);
  CHECK(acc.value(RoundingMode::up) == tiny);
  acc.clear();
  acc.add_product(std::numeric_limits<double>::max(), 2.0);
  CHECK(std::isinf(acc.value()));
  acc.add_product(-std::numeric_limits<double>::max(), 2.0);
  CHECK(acc.value() == 0.0);
  acc.clear();
  acc.add(std::numeric_limits<double>::infinity());
  acc.add(-std::numeric_limits<double>::infinity());
  CHECK(std::isnan(acc.value()));
}

TEST_CASE("model specs: parse, JSON, canonical spec, errors naming the token", "[accumulation]") {
  CHECK(AccumulationModel::parse("sequential:fp32:rne").spec() == "sequential:binary32:rne");
  CHECK(AccumulationModel::parse("fma").spec() == "fma:binary32:rne");
  CHECK(AccumulationModel::parse("blocked:32").spec() == "blocked:32:binary32:rne");
  CHECK(AccumulationModel::parse("kahan:bf16:rtz").spec() == "kahan:bfloat16:rtz");
  CHECK(AccumulationModel::parse("exact").spec() == "exact:binary64:rne");
  CHECK(AccumulationModel::parse("tc:h100").spec() == "tc:h100:binary16:binary32");
  CHECK(AccumulationModel::parse("tc:h100:e4m3:fp32:wgmma").spec() == "tc:h100:e4m3:binary32:wgmma");
  for (const char* s :
       {"sequential:bf16:sr:seed=3", "pairwise:fp16:rtz", "tc:ada:bf16:fp32", "exact:fp32:rd"})
    CHECK(AccumulationModel::parse(AccumulationModel::parse(s).spec()).spec() ==
          AccumulationModel::parse(s).spec());
  CHECK(AccumulationModel::from_json(
            nlohmann::json::parse(R"({"kind":"sequential","format":"bf16","rounding":"sr","seed":7})"))
            .spec() == "sequential:bfloat16:sr:seed=7");
  const auto tc = AccumulationModel::from_json(nlohmann::json::parse(
      R"({"kind":"tc","preset":"a100","input":"fp16","output":"fp32","terms_per_step":4})"));
  CHECK(tc.bare_instruction()->terms_per_step == 4);
  CHECK(AccumulationModel::from_json(nlohmann::json("kahan")).spec() == "kahan:binary32:rne");
  CHECK_THROWS_WITH(AccumulationModel::parse("blocked"), Catch::Contains("block size"));
  CHECK_THROWS_WITH(AccumulationModel::parse("blocked:x"), Catch::Contains("'x'"));
  CHECK_THROWS_WITH(AccumulationModel::parse("sequential:fp99"), Catch::Contains("fp99"));
  CHECK_THROWS_WITH(AccumulationModel::parse("sequential:fp32:rnx"), Catch::Contains("rnx"));
  CHECK_THROWS_WITH(AccumulationModel::parse("tc:z100"), Catch::Contains("z100"));
  CHECK_THROWS_WITH(AccumulationModel::parse("magic"), Catch::Contains("magic"));
  CHECK_THROWS_WITH(AccumulationModel::parse("fma:fp32:sr:seed=x"), Catch::Contains("seed=x"));
  CHECK_THROWS_WITH(AccumulationModel::from_json(nlohmann::json::parse(R"({"format":"fp32"})")),
                    Catch::Contains("kind"));
}

TEST_CASE("GEMM under summation models equals per-element dot products", "[accumulation][gemm]") {
  std::mt19937_64 rng(5);
  Matrix a(6, 50), b(50, 4), c(6, 4);
  for (Eigen::Index i = 0; i < a.size(); ++i)
    a.data()[i] =
        static_cast<float>(std::ldexp(1.0 + (rng() % 1000) / 1000.0, static_cast<int>(rng() % 7) - 3));
  for (Eigen::Index i = 0; i < b.size(); ++i)
    b.data()[i] = static_cast<float>((static_cast<double>(rng() % 2001) - 1000) / 128);
  c.setZero();
  for (const char* spec : {"sequential:bf16:sr:seed=4", "pairwise:fp16", "kahan", "exact:fp32"}) {
    const auto model = AccumulationModel::parse(spec);
    const Matrix d = gemm(model, a, b, c, GemmOptions{2});
    INFO(spec);
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < b.cols(); ++j) {
        std::vector<double> row(a.row(i).begin(), a.row(i).end()), col(b.col(j).begin(), b.col(j).end());
        CHECK(d(i, j) == model.dot(row, col, c(i, j), static_cast<std::uint64_t>(i * b.cols() + j)));
      }
  }
  CHECK_THROWS_WITH(gemm(AccumulationModel(), a, a, c), Catch::Contains("6x50"));
}

TEST_CASE("eigen:binary64 is Eigen's product, named as such, independent of the thread count",
          "[accumulation][gemm]") {
  const auto eigen = AccumulationModel::parse("eigen");
  CHECK(eigen.spec() == "eigen:binary64");
  CHECK(AccumulationModel::parse("eigen:fp64:rne").spec() == "eigen:binary64");
  CHECK(AccumulationModel::from_json(nlohmann::json::parse(R"({"kind":"eigen"})")).spec() ==
        "eigen:binary64");
  CHECK(&eigen.output_format() == &formats::binary64());
  CHECK_THROWS_WITH(AccumulationModel::parse("eigen:fp32"), Catch::Contains("binary64 only"));
  CHECK_THROWS_WITH(AccumulationModel::parse("eigen:fp64:rtz"), Catch::Contains("nearest even"));
  CHECK_THROWS_WITH(AccumulationModel::parse("eigen:fp64:rne:seed=1"), Catch::Contains("no seed"));
  CHECK(eigen.dot(kStagnation, kOnes, 0.5) == 1.5 + 3 * std::ldexp(1, -24));
  // K = 784 is past Eigen's multi-threaded depth block (320): a product that
  // Eigen parallelised itself would sum in a different order.
  std::mt19937_64 rng(9);
  std::normal_distribution<double> nd(0, 1);
  Matrix a(150, 784), b(784, 40), c(150, 40);
  for (Eigen::Index i = 0; i < a.size(); ++i)
    a.data()[i] = std::ldexp(nd(rng), static_cast<int>(rng() % 20) - 10);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = nd(rng);
  for (Eigen::Index i = 0; i < c.size(); ++i) c.data()[i] = nd(rng);
  const Matrix d1 = gemm(eigen, a, b, c, GemmOptions{1});
  const Matrix d2 = gemm(eigen, a, b, c, GemmOptions{2});
  CHECK((d1.array() == d2.array()).all());
  // Within the deterministic bound of any summation order.
  const double u = std::ldexp(1, -53);
  for (Eigen::Index i = 0; i < a.rows(); i += 7)
    for (Eigen::Index j = 0; j < b.cols(); j += 3) {
      std::vector<double> row(a.row(i).begin(), a.row(i).end()), col(b.col(j).begin(), b.col(j).end());
      row.push_back(c(i, j));
      col.push_back(1.0);
      const double exact = AccumulationModel::parse("exact").dot(row, col);
      CHECK(std::fabs(d1(i, j) - exact) <= gamma_n(785, u) * exact_abs_dot(row, col));
    }
}

TEST_CASE("tensor core overrides: spec string and JSON alike, written back by spec()", "[accumulation][tc]") {
  const auto m = AccumulationModel::parse("tc:h100:fp16:fp32:terms_per_step=8:final_rounding=rne");
  const auto& tc = *m.bare_instruction();
  CHECK(tc.terms_per_step == 8);
  CHECK(tc.final_rounding == RoundingMode::nearest_even);
  CHECK(tc.fraction_bits == 25);  // the rest is the preset's
  // Only what differs from the preset is written, and it parses back to the same model.
  CHECK(m.spec() == "tc:h100:binary16:binary32:terms_per_step=8:final_rounding=rne");
  CHECK(AccumulationModel::parse(m.spec()).spec() == m.spec());
  CHECK(AccumulationModel::parse("tc:h100:fp16:fp32:terms_per_step=16").spec() ==
        "tc:h100:binary16:binary32");

  const auto j = AccumulationModel::from_json(nlohmann::json::parse(
      R"({"kind":"tc","preset":"ada","input":"e4m3","output":"fp16","c_join":"after_products",
          "terms_per_instruction":32,"step_interleave":2,"subnormal_outputs":false})"));
  const auto& jt = *j.bare_instruction();
  CHECK(jt.c_join == CJoin::after_products);
  CHECK(jt.terms_per_instruction == 32);
  CHECK(jt.step_interleave == 2);
  CHECK_FALSE(jt.subnormal_outputs);
  CHECK(AccumulationModel::parse(j.spec()).spec() == j.spec());
  // The spec carries the overrides into results: the model it names computes the same.
  const std::vector<double> a{1, 0.5, 0.25, -1}, b{0.25, 0.125, 2, 0.0625};
  CHECK(AccumulationModel::parse(j.spec()).dot(a, b, 0.125) == j.dot(a, b, 0.125));

  CHECK_THROWS_WITH(AccumulationModel::parse("tc:h100:fp16:fp32:terms=8"), Catch::Contains("'terms'"));
  CHECK_THROWS_WITH(AccumulationModel::parse("tc:h100:fp16:fp32:fraction_bits=x"),
                    Catch::Contains("fraction_bits='x'"));
  CHECK_THROWS_WITH(AccumulationModel::parse("tc:h100:fp16:fp32:fraction_bits=99"), Catch::Contains("99"));
  CHECK(AccumulationModel::parse("tc:b200:e4m3:fp32").spec() == "tc:b200:e4m3:binary32");
  CHECK(AccumulationModel::parse("tc:b200:e4m3:fp32").bare_instruction()->c_join == CJoin::after_products);
  CHECK_THROWS_WITH(AccumulationModel::parse("tc:h100:fp16:fp32:c_join=late"),
                    Catch::Contains("c_join='late'"));
  CHECK_THROWS_WITH(AccumulationModel::parse("tc:h100:fp16:fp32:subnormal_inputs=maybe"),
                    Catch::Contains("subnormal_inputs='maybe'"));
  CHECK_THROWS_WITH(AccumulationModel::from_json(
                        nlohmann::json::parse(R"({"kind":"tc","preset":"a100","terms_per_stepp":4})")),
                    Catch::Contains("terms_per_stepp"));
  CHECK_THROWS_WITH(AccumulationModel::from_json(nlohmann::json::parse(
                        R"({"kind":"sequential","format":"fp16","block":4,"fromat":"bf16"})")),
                    Catch::Contains("fromat"));
  CHECK_THROWS_WITH(AccumulationModel::from_json(
                        nlohmann::json::parse(R"({"kind":"tc","preset":"a100","terms_per_step":[4]})")),
                    Catch::Contains("terms_per_step"));
}

TEST_CASE("a model answers its own formats, rounding and unit roundoff", "[accumulation]") {
  // Round to nearest: u = 2^-p; directed rounding: u = 2^(1-p) (Higham, ASNA Thm 2.2).
  const auto rne = AccumulationModel::parse("sequential:fp16");
  CHECK(rne.rounding() == RoundingMode::nearest_even);
  CHECK(rne.unit_roundoff() == std::ldexp(1.0, -11));
  const auto rtz = AccumulationModel::parse("sequential:fp16:rtz");
  CHECK(rtz.rounding() == RoundingMode::toward_zero);
  CHECK(rtz.unit_roundoff() == std::ldexp(1.0, -10));
  CHECK(rtz.input_format() == formats::binary16());
  // A tensor core reads its input format and rounds its normalisation its own way.
  const auto tc = AccumulationModel::parse("tc:h100:bf16:fp32");
  CHECK(tc.input_format() == formats::bfloat16());
  CHECK(tc.output_format() == formats::binary32());
  CHECK(tc.rounding() == RoundingMode::toward_zero);
  CHECK(tc.unit_roundoff() == std::ldexp(1.0, -23));
  CHECK(AccumulationModel::parse("exact:fp32:ru").unit_roundoff() == std::ldexp(1.0, -23));
  CHECK(AccumulationModel::parse("eigen:binary64").unit_roundoff() == std::ldexp(1.0, -53));
}
