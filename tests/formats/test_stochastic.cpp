// Stochastic rounding's guarantees (issue 2):
//  (a) a representable value never moves, whatever the random bits;
//  (b) SR is unbiased up to the truncation of the discarded fraction to k =
//      stochastic_bits bits: the mean of N draws is within a stated bound of x;
//  (c) with counter-based draws keyed by element index, the rounded array is
//      byte-identical for 1 and 2 OpenMP threads and any schedule.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/scoped_rounding.hpp"
#include "rpsim/formats/unpacked.hpp"
#include "rpsim/formats/value.hpp"

using namespace rpsim;

namespace {

Rounding stochastic(std::uint64_t random_bits, int k = 32) {
  Rounding r;
  r.mode = RoundingMode::stochastic;
  r.stochastic_bits = k;
  r.random_bits = random_bits;
  return r;
}

// Draws that an implementation is most likely to get wrong, then random ones.
std::vector<std::uint64_t> draws(std::uint64_t seed, int count) {
  std::vector<std::uint64_t> d = {0, ~0ull, 0xFFFFFFFFull, 0x80000000ull, 0x7FFFFFFFull, 1};
  for (int i = 0; i < count; ++i) d.push_back(counter_random(seed, 0, std::uint64_t(i)));
  return d;
}

}  // namespace

TEST_CASE("SR never moves a representable value: every binary16, bfloat16 and e4m3 encoding",
          "[stochastic]") {
  for (const Format* narrow :
       {&formats::binary16(), &formats::bfloat16(), &formats::e4m3(), &format("e2m1")}) {
    const auto random = draws(narrow->bits, 26);  // 32 draws per value and source
    std::uint64_t checked = 0, moved = 0, flagged = 0;
    for (std::uint64_t b = 0; b <= narrow->bit_mask(); ++b) {
      if (is_nan(*narrow, b)) continue;
      for (const Format* wide : {&formats::binary32(), &formats::binary64()}) {
        Flags widen_flags = 0;
        const std::uint64_t w = convert(*wide, *narrow, b, Rounding{}, widen_flags);
        REQUIRE(widen_flags == 0);  // widening is exact
        for (std::uint64_t rb : random) {
          Flags fl = 0;
          const std::uint64_t back = convert(*narrow, *wide, w, stochastic(rb), fl);
          ++checked;
          moved += back != b;
          flagged += fl != 0;
        }
      }
    }
    INFO(narrow->name << ": " << checked << " conversions");
    CHECK(checked >= 2 * 32 * 15);
    CHECK(moved == 0);
    CHECK(flagged == 0);
  }
}

TEST_CASE("SR never moves an exactly representable result of an operation", "[stochastic]") {
  const Format& f = formats::binary16();
  const auto random = draws(99, 14);
  std::uint64_t exact_cases = 0, mismatches = 0;
  // Operands: every small integer and a spread of random encodings; keep the
  // operations whose exact result is representable (RNE raises no inexact).
  std::vector<std::uint64_t> operands;
  for (int v = -40; v <= 40; ++v) operands.push_back(round_double(f, v / 4.0));
  for (std::uint64_t i = 0; i < 60; ++i) operands.push_back(counter_random(7, 1, i) & 0x7BFF);
  for (std::uint64_t a : operands)
    for (std::uint64_t b : operands) {
      const std::uint64_t c = operands[(a * 31 + b) % operands.size()];
      auto check = [&](auto op) {
        Flags fl = 0;
        const std::uint64_t rne = op(Rounding{}, fl);
        if (fl != 0) return;
        ++exact_cases;
        for (std::uint64_t rb : random) {
          Flags sfl = 0;
          mismatches += op(stochastic(rb), sfl) != rne || sfl != 0;
        }
      };
      check([&](const Rounding& r, Flags& fl) { return add(f, a, b, r, fl); });
      check([&](const Rounding& r, Flags& fl) { return sub(f, a, b, r, fl); });
      check([&](const Rounding& r, Flags& fl) { return mul(f, a, b, r, fl); });
      check([&](const Rounding& r, Flags& fl) { return div(f, a, b, r, fl); });
      check([&](const Rounding& r, Flags& fl) { return fma(f, a, b, c, r, fl); });
      check([&](const Rounding& r, Flags& fl) { return sqrt(f, a, r, fl); });
    }
  INFO(exact_cases << " exact operations");
  CHECK(exact_cases > 10000);
  CHECK(mismatches == 0);
}

namespace {

// The statistical bound of (b). SR(x) takes the neighbour below, lo, or above,
// hi = lo + ulp, rounding up when frac_k + r >= 2^k, where frac_k is the
// discarded fraction p = (x - lo)/ulp truncated to k bits and r is uniform on
// [0, 2^k). So P(up) = p' = floor(p * 2^k) / 2^k, in (p - 2^-k, p], and
//   E[SR(x)] = lo + p' * ulp,   |E[SR(x)] - x| < 2^-k * ulp,
//   sigma = ulp * sqrt(p'(1 - p')) <= ulp / 2.
// The mean of N draws is within 5 sigma / sqrt(N) of E[SR(x)] except with
// probability below 6e-7 (normal approximation), so the check is
//   |mean - x| <= 5 * (ulp/2) / sqrt(N) + 2^-k * ulp.
// The draws are counter-based and fixed, so the outcome is reproducible.
struct SrStats {
  double lo = 0, hi = 0, ulp = 0, p = 0;  // neighbours and the exact fractional position
  double mean = 0, fraction_up = 0;
  std::uint64_t off_grid = 0;  // draws that were neither neighbour
};

constexpr int kDraws = 100000;

SrStats sample(const Format& f, double x, int k, std::uint64_t seed) {
  SrStats s;
  Rounding down, up;
  down.mode = RoundingMode::down;
  up.mode = RoundingMode::up;
  s.lo = to_double(f, round_double(f, x, down.mode));
  s.hi = to_double(f, round_double(f, x, up.mode));
  s.ulp = s.hi - s.lo;
  s.p = (x - s.lo) / s.ulp;
  double sum = 0;
  std::uint64_t ups = 0;
  for (int i = 0; i < kDraws; ++i) {
    Flags fl = 0;
    const double v =
        to_double(f, round_double(f, x, stochastic(counter_random(seed, 3, std::uint64_t(i)), k), fl));
    sum += v;  // values of at most 12 significant bits, N = 1e5: the sum is exact
    ups += v == s.hi;
    s.off_grid += v != s.hi && v != s.lo;
  }
  s.mean = sum / kDraws;
  s.fraction_up = double(ups) / kDraws;
  return s;
}

void check_unbiased(const Format& f, double x, int k = 32) {
  const SrStats s = sample(f, x, k, 0xC0FFEE + std::uint64_t(k));
  INFO(f.name << " x=" << x << " k=" << k << " lo=" << s.lo << " hi=" << s.hi << " p=" << s.p
              << " mean=" << s.mean << " up=" << s.fraction_up);
  REQUIRE(s.ulp > 0);  // x is not representable
  CHECK(s.off_grid == 0);
  const double bound = 5 * (s.ulp / 2) / std::sqrt(double(kDraws)) + std::ldexp(s.ulp, -k);
  CHECK(std::fabs(s.mean - x) <= bound);
  // The round-up frequency tracks the truncated fractional position.
  // SR works on magnitudes: for x < 0 the fraction that is truncated is the
  // distance from hi (toward zero), and rounding "up" in magnitude goes to lo.
  const double magnitude_fraction = x < 0 ? 1 - s.p : s.p;
  const double truncated = std::floor(std::ldexp(magnitude_fraction, k)) / std::ldexp(1.0, k);
  const double p_up = x < 0 ? 1 - truncated : truncated;
  CHECK(std::fabs(s.fraction_up - p_up) <= 5 * std::sqrt(p_up * (1 - p_up) / kDraws) + 1e-12);
}

}  // namespace

TEST_CASE("SR is unbiased: mean of 1e5 draws within 5 sigma/sqrt(N) + 2^-k ulp of x", "[stochastic]") {
  const Format& h = formats::binary16();
  for (double x :
       {0.1, 1.0 / 3, 1.0 + 0.3 * 0x1p-10, 1.0 + 0x1p-12, 1000.3, -2.7183, 3.3e-6, -1.0e-7, 60000.5})
    check_unbiased(h, x);
  const Format& b = formats::bfloat16();
  for (double x : {0.1, 1.0 / 3, 3.14159265358979, -1.0e30, 1.0 + 0.9 * 0x1p-7, 5.0e-39})
    check_unbiased(b, x);
  const Format& e4 = formats::e4m3();
  for (double x : {0.1, 3.3, 300.0, -0.005, 440.0}) check_unbiased(e4, x);
}

TEST_CASE("with few random bits SR's bias is the stated 2^-k ulp, no more", "[stochastic]") {
  const Format& h = formats::binary16();
  // p = 0.3 truncated to 4 bits is 0.25: the mean sits 0.05 ulp low, inside
  // the 2^-4 = 0.0625 ulp allowance, and the up-frequency is 0.25, not 0.3.
  const double x = 1.0 + 0.3 * 0x1p-10;
  check_unbiased(h, x, 4);
  const SrStats s = sample(h, x, 4, 1);
  CHECK(std::fabs(s.fraction_up - 0.25) < 0.01);
  CHECK(s.mean < x - 0.04 * s.ulp);
  check_unbiased(h, x, 8);
  check_unbiased(h, 1.0 / 3, 1);
}

TEST_CASE("SR of arithmetic through ScopedRounding is unbiased and reproducible", "[stochastic]") {
  const half one(1.0), small(0x1p-12);  // 1 + 2^-12: a quarter of the way from 1 to 1 + 2^-10
  const double exact = 1.0 + 0x1p-12;
  auto run = [&](std::uint64_t seed) {
    ScopedRounding sr(RoundingMode::stochastic, seed);
    std::vector<std::uint64_t> bits(kDraws);
    for (auto& b : bits) b = (one + small).bits();
    CHECK(sr.draws() == std::uint64_t(kDraws));
    CHECK(sr.test(flag_inexact));
    return bits;
  };
  const auto first = run(2024), again = run(2024), other = run(2025);
  CHECK(first == again);
  CHECK(first != other);
  double sum = 0;
  for (auto b : first) sum += to_double(half::format(), b);
  const double ulp = 0x1p-10;
  CHECK(std::fabs(sum / kDraws - exact) <= 5 * (ulp / 2) / std::sqrt(double(kDraws)) + std::ldexp(ulp, -32));

  // A nested guard without its own seed continues the enclosing counter, so
  // no draw is used twice; one with a seed restarts its own.
  ScopedRounding outer(RoundingMode::stochastic, 5);
  (void)(one + small);
  {
    ScopedRounding inner(RoundingMode::stochastic);
    (void)(one + small);
    CHECK(inner.draws() == 2);
  }
  CHECK(outer.draws() == 2);
  {
    ScopedRounding seeded(RoundingMode::stochastic, 6);
    CHECK(seeded.draws() == 0);
    (void)(one + small);
  }
  CHECK(outer.draws() == 2);
  {
    ScopedRounding rne(RoundingMode::nearest_even);
    (void)(one + small);  // deterministic modes draw nothing
  }
  CHECK(outer.draws() == 2);
}

TEST_CASE("SR with counter-based draws is byte-identical for 1 and 2 OpenMP threads", "[stochastic][omp]") {
  constexpr std::int64_t n = 1'000'000;
  const Format& f = formats::bfloat16();
  std::vector<double> x(n);
  for (std::int64_t i = 0; i < n; ++i)
    x[std::size_t(i)] =
        std::ldexp(double(counter_random(1, 0, std::uint64_t(i)) >> 11) * 0x1p-53 - 0.5, int(i % 40) - 20);
  constexpr std::uint64_t seed = 0x5EED, stream = 17;
  auto round_all = [&](int threads, int schedule, std::uint64_t s) {
    std::vector<std::uint16_t> out(n);
    int widest = 0;
    auto body = [&](std::int64_t i) {
      Flags fl = 0;
      out[std::size_t(i)] = std::uint16_t(
          round_double(f, x[std::size_t(i)], stochastic(counter_random(s, stream, std::uint64_t(i))), fl));
    };
#pragma omp parallel num_threads(threads) reduction(max : widest)
    {
      widest = omp_get_num_threads();
      if (schedule == 0) {
#pragma omp for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) body(i);
      } else if (schedule == 1) {
#pragma omp for schedule(dynamic, 997)
        for (std::int64_t i = 0; i < n; ++i) body(i);
      } else {
#pragma omp for schedule(guided)
        for (std::int64_t i = 0; i < n; ++i) body(i);
      }
    }
    return std::pair{out, widest};
  };
  const auto [serial, one_thread] = round_all(1, 0, seed);
  CHECK(one_thread == 1);
  for (int schedule : {0, 1, 2}) {
    const auto [parallel, threads] = round_all(2, schedule, seed);
    INFO("schedule " << schedule << ", threads " << threads);
    if (threads < 2) WARN("OpenMP gave only " << threads << " thread(s); the 2-thread case ran serially");
    CHECK(std::memcmp(serial.data(), parallel.data(), serial.size() * sizeof(serial[0])) == 0);
  }
  // Not vacuous: SR differs from RNE on many elements, and the seed matters.
  std::int64_t differs_from_rne = 0, differs_by_seed = 0;
  const auto [reseeded, unused] = round_all(2, 1, seed + 1);
  (void)unused;
  for (std::int64_t i = 0; i < n; ++i) {
    differs_from_rne += serial[std::size_t(i)] != round_double(f, x[std::size_t(i)]);
    differs_by_seed += serial[std::size_t(i)] != reseeded[std::size_t(i)];
  }
  CHECK(differs_from_rne > n / 10);
  CHECK(differs_by_seed > n / 10);
}

TEST_CASE("typed values under SR in OpenMP: a guard keyed by element gives thread-count-free results",
          "[stochastic][omp]") {
  // The pattern for typed code: each element opens a guard whose stream is
  // the element's index, so its draws are counter_random(seed, i, 0, 1, ...)
  // whichever thread runs it.
  constexpr std::int64_t n = 100'000;
  auto run = [&](int threads) {
    std::vector<std::uint16_t> out(n);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 101)
    for (std::int64_t i = 0; i < n; ++i) {
      ScopedRounding sr(RoundingMode::stochastic, 0xABC, std::uint64_t(i));
      const half a(1.0 + double(i % 1000) * 0x1p-14), b(0.1);
      out[std::size_t(i)] = std::uint16_t(fma(a, b, a).bits());  // three draws: a, b, then the fma
    }
    return out;
  };
  const auto one = run(1), two = run(2);
  CHECK(one == two);
  // Each element's first draw is counter_random(seed, i, 0), as documented.
  std::int64_t agree = 0, rounded_up = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = 1.0 + double(i % 1000) * 0x1p-14;
    ScopedRounding sr(RoundingMode::stochastic, 0xABC, std::uint64_t(i));
    Flags fl = 0;
    const std::uint64_t expected =
        round_double(formats::binary16(), x, stochastic(counter_random(0xABC, std::uint64_t(i), 0)), fl);
    const half h(x);
    agree += h.bits() == expected;
    rounded_up += double(h) > x;
  }
  CHECK(agree == n);
  CHECK(rounded_up > n / 10);  // SR really happened
}
