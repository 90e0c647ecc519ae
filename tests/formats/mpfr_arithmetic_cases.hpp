// Operand sets and the checking loop shared by the MPFR arithmetic and
// comparison tests (tests/formats/test_mpfr_*.cpp): every operand pair of the
// small formats, edge values and random samples of the wide ones.
#pragma once

#include <mpfr.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mpfr_oracle.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim::test {

using oracle::Op;

constexpr std::array<RoundingMode, 6> kModes = {RoundingMode::nearest_even, RoundingMode::nearest_away,
                                                RoundingMode::toward_zero,  RoundingMode::down,
                                                RoundingMode::up,           RoundingMode::odd};
constexpr std::array<Op, 4> kBinaryOps = {Op::add, Op::sub, Op::mul, Op::div};

using Operands = std::array<std::uint64_t, 3>;

struct Tally {
  std::uint64_t checked = 0;
  std::uint64_t failed = 0;
  std::vector<std::string> first_failures;
};

inline std::uint64_t run_core(Op op, const Format& f, const Operands& x, const Rounding& r, Flags& fl) {
  switch (op) {
    case Op::add: return rpsim::add(f, x[0], x[1], r, fl);
    case Op::sub: return rpsim::sub(f, x[0], x[1], r, fl);
    case Op::mul: return rpsim::mul(f, x[0], x[1], r, fl);
    case Op::div: return rpsim::div(f, x[0], x[1], r, fl);
    case Op::sqrt: return rpsim::sqrt(f, x[0], r, fl);
    case Op::fma: return rpsim::fma(f, x[0], x[1], x[2], r, fl);
  }
  return 0;
}

inline std::string mismatch(Op op, const Format& f, const Operands& x, RoundingMode mode,
                            const oracle::Expected& want, std::uint64_t got, Flags got_flags) {
  std::ostringstream s;
  s << f.name << " " << oracle::op_name(op) << " " << rounding_name(mode) << std::hex << " 0x" << x[0];
  if (op != Op::sqrt) s << " 0x" << x[1];
  if (op == Op::fma) s << " 0x" << x[2];
  s << ": expected 0x" << want.bits << " flags 0x" << int(want.flags) << ", got 0x" << got << " flags 0x"
    << int(got_flags);
  return s.str();
}

inline void check(Op op, const Format& f, RoundingMode mode, const std::vector<Operands>& cases, Tally& tally,
                  bool daz_ftz = false) {
  std::uint64_t failed = 0;
  std::vector<std::string> notes;
  const auto n = std::int64_t(cases.size());
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : failed) if (mpfr_buildopt_tls_p())
  for (std::int64_t i = 0; i < n; ++i) {
    const Operands& x = cases[std::size_t(i)];
    Rounding r;
    r.mode = mode;
    r.flush_subnormal_inputs = r.flush_subnormal_outputs = daz_ftz;
    Flags got_flags = 0;
    const std::uint64_t got = run_core(op, f, x, r, got_flags);
    oracle::Options opt;
    opt.flush_subnormal_inputs = opt.flush_subnormal_outputs = daz_ftz;
    const oracle::Expected want = oracle::arithmetic(op, f, x[0], x[1], x[2], mode, opt);
    if (got != want.bits || got_flags != want.flags) {
      ++failed;
#pragma omp critical
      if (notes.size() < 4) notes.push_back(mismatch(op, f, x, mode, want, got, got_flags));
    }
  }
  tally.checked += cases.size();
  tally.failed += failed;
  for (auto& note : notes)
    if (tally.first_failures.size() < 16) tally.first_failures.push_back(std::move(note));
}

inline void report(const Tally& t) {
  std::string notes;
  for (const auto& n : t.first_failures) notes += "\n  " + n;
  INFO(t.failed << " of " << t.checked << " results differ from MPFR:" << notes);
  CHECK(t.checked > 0);
  CHECK(t.failed == 0);
}

inline std::uint64_t encodings(const Format& f) {
  return std::uint64_t(1) << f.bits;
}

// Encodings that sit on the edges of a format's range, both signs.
inline std::vector<std::uint64_t> edge_values(const Format& f) {
  std::vector<std::uint64_t> v;
  const std::uint64_t field1 = std::uint64_t(1) << f.man_bits;  // smallest normal
  const std::uint64_t one = std::uint64_t(f.bias) << f.man_bits;
  const std::uint64_t max = oracle::max_finite_encoding(f, false);
  const std::uint64_t positives[] = {0,
                                     1,
                                     2,
                                     f.man_mask(),
                                     f.man_mask() - 1,
                                     field1,
                                     field1 + 1,
                                     field1 * 2,
                                     one,
                                     one + 1,
                                     one - 1,
                                     one + field1,
                                     max,
                                     max - 1,
                                     one | f.man_mask(),
                                     one | (std::uint64_t(1) << (f.man_bits - 1))};
  for (std::uint64_t p : positives) {
    v.push_back(p & f.bit_mask());
    v.push_back((p | f.sign_bit()) & f.bit_mask());
  }
  if (f.has_inf()) {
    v.push_back(oracle::infinity_encoding(f, false));
    v.push_back(oracle::infinity_encoding(f, true));
  }
  if (f.has_nan()) {
    v.push_back(oracle::nan_encoding(f, false));
    v.push_back(oracle::nan_encoding(f, true));
  }
  if (f.nan == NanEncoding::ieee) {  // signalling NaNs with payloads
    v.push_back(oracle::infinity_encoding(f, false) | 1);
    v.push_back(oracle::infinity_encoding(f, true) | (f.man_mask() >> 1));
    v.push_back(oracle::nan_encoding(f, false) | 1);
  }
  return v;
}

// Random encodings biased toward the interesting ones: edges, exponents near
// the ends of the range, significands with few bits (exact results, midpoints)
// and operands of nearby exponents (cancellation).
class OperandSource {
 public:
  OperandSource(const Format& f, std::uint64_t seed) : f_(f), edges_(edge_values(f)), rng_(seed) {}

  std::uint64_t next(std::uint64_t near = 0) {
    const std::uint64_t fields = f_.exp_field_max() + 1;
    std::uint64_t sign = (rng_() & 1) ? f_.sign_bit() : 0;
    std::uint64_t fraction = rng_() & f_.man_mask();
    switch (rng_() % 8) {
      case 0: return edges_[rng_() % edges_.size()];
      case 1: return rng_() & f_.bit_mask();
      case 2: {  // tiny: subnormal or the lowest binades
        const std::uint64_t field = rng_() % 3;
        return sign | field << f_.man_bits | fraction;
      }
      case 3: {  // huge: the top binades
        const std::uint64_t field = fields - 1 - rng_() % 3;
        return (sign | field << f_.man_bits | fraction) & f_.bit_mask();
      }
      case 4: {  // few significant bits
        const int keep = int(rng_() % 4);
        fraction &= ~(f_.man_mask() >> keep);
        [[fallthrough]];
      }
      default: {  // near `near`'s exponent, or near 1
        const std::int64_t base = near ? std::int64_t((near >> f_.man_bits) & f_.exp_field_max()) : f_.bias;
        std::int64_t field = base + std::int64_t(rng_() % 9) - 4;
        if (rng_() % 4 == 0) field = base + std::int64_t(rng_() % (2 * f_.man_bits + 8)) - f_.man_bits - 4;
        field = std::clamp<std::int64_t>(field, 0, std::int64_t(fields) - 1);
        return sign | std::uint64_t(field) << f_.man_bits | fraction;
      }
    }
  }

 private:
  const Format& f_;
  std::vector<std::uint64_t> edges_;
  std::mt19937_64 rng_;
};

inline std::vector<Operands> all_pairs(const Format& f) {
  std::vector<Operands> cases;
  const std::uint64_t n = encodings(f);
  cases.reserve(n * n);
  for (std::uint64_t a = 0; a < n; ++a)
    for (std::uint64_t b = 0; b < n; ++b) cases.push_back({a, b, 0});
  return cases;
}

inline std::vector<Operands> all_singles(const Format& f) {
  std::vector<Operands> cases;
  for (std::uint64_t a = 0; a < encodings(f); ++a) cases.push_back({a, 0, 0});
  return cases;
}

inline std::vector<Operands> all_triples(const Format& f) {
  std::vector<Operands> cases;
  const std::uint64_t n = encodings(f);
  for (std::uint64_t a = 0; a < n; ++a)
    for (std::uint64_t b = 0; b < n; ++b)
      for (std::uint64_t c = 0; c < n; ++c) cases.push_back({a, b, c});
  return cases;
}

// Every pairing of edge values, then random operands.
inline std::vector<Operands> sampled(const Format& f, Op op, std::size_t random_count, std::uint64_t seed) {
  std::vector<Operands> cases;
  const auto edges = edge_values(f);
  for (std::uint64_t a : edges)
    for (std::uint64_t b : edges) {
      if (op == Op::fma) {
        for (std::uint64_t c : edges) cases.push_back({a, b, c});
      } else {
        cases.push_back({a, op == Op::sqrt ? 0 : b, 0});
      }
    }
  OperandSource src(f, seed);
  for (std::size_t i = 0; i < random_count; ++i) {
    const std::uint64_t a = src.next();
    const std::uint64_t b = src.next(a);
    std::uint64_t c = src.next(a);
    if (op == Op::fma && i % 2 == 0) {
      // c close to -(a*b): massive cancellation, the hard case of an FMA.
      const std::uint64_t product = oracle::arithmetic(Op::mul, f, a, b, 0, RoundingMode::nearest_even).bits;
      const std::uint64_t nudge = (i / 2) % 5;  // 0..4 units in the last place
      c = (product ^ f.sign_bit()) + ((i / 2) % 3 == 0 ? nudge : 0) - ((i / 2) % 3 == 1 ? nudge : 0);
      c &= f.bit_mask();
    }
    if (op != Op::fma) c = 0;
    if (op == Op::sqrt)
      cases.push_back({a, 0, 0});
    else
      cases.push_back({a, b, c});
  }
  return cases;
}

const std::array<const char*, 7> kSmallFormats = {"e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz",
                                                  "e3m2", "e2m3", "e2m1"};
const std::array<const char*, 5> kWideFormats = {"bfloat16", "tf32", "binary16", "binary32", "binary64"};

}  // namespace rpsim::test
