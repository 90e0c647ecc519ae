// add sub mul div sqrt fma against MPFR: exhaustive over all operand pairs for
// the formats of 8 bits or fewer, edge cases plus random operands for the
// wider ones, in all six deterministic modes; result bits and flags.
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

using namespace rpsim;
using oracle::Op;

namespace {

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

std::uint64_t run_core(Op op, const Format& f, const Operands& x, const Rounding& r, Flags& fl) {
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

std::string mismatch(Op op, const Format& f, const Operands& x, RoundingMode mode,
                     const oracle::Expected& want, std::uint64_t got, Flags got_flags) {
  std::ostringstream s;
  s << f.name << " " << oracle::op_name(op) << " " << rounding_name(mode) << std::hex << " 0x" << x[0];
  if (op != Op::sqrt) s << " 0x" << x[1];
  if (op == Op::fma) s << " 0x" << x[2];
  s << ": expected 0x" << want.bits << " flags 0x" << int(want.flags) << ", got 0x" << got << " flags 0x"
    << int(got_flags);
  return s.str();
}

void check(Op op, const Format& f, RoundingMode mode, const std::vector<Operands>& cases, Tally& tally,
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

void report(const Tally& t) {
  std::string notes;
  for (const auto& n : t.first_failures) notes += "\n  " + n;
  INFO(t.failed << " of " << t.checked << " results differ from MPFR:" << notes);
  CHECK(t.checked > 0);
  CHECK(t.failed == 0);
}

std::uint64_t encodings(const Format& f) {
  return std::uint64_t(1) << f.bits;
}

// Encodings that sit on the edges of a format's range, both signs.
std::vector<std::uint64_t> edge_values(const Format& f) {
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

std::vector<Operands> all_pairs(const Format& f) {
  std::vector<Operands> cases;
  const std::uint64_t n = encodings(f);
  cases.reserve(n * n);
  for (std::uint64_t a = 0; a < n; ++a)
    for (std::uint64_t b = 0; b < n; ++b) cases.push_back({a, b, 0});
  return cases;
}

std::vector<Operands> all_singles(const Format& f) {
  std::vector<Operands> cases;
  for (std::uint64_t a = 0; a < encodings(f); ++a) cases.push_back({a, 0, 0});
  return cases;
}

std::vector<Operands> all_triples(const Format& f) {
  std::vector<Operands> cases;
  const std::uint64_t n = encodings(f);
  for (std::uint64_t a = 0; a < n; ++a)
    for (std::uint64_t b = 0; b < n; ++b)
      for (std::uint64_t c = 0; c < n; ++c) cases.push_back({a, b, c});
  return cases;
}

// Every pairing of edge values, then random operands.
std::vector<Operands> sampled(const Format& f, Op op, std::size_t random_count, std::uint64_t seed) {
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

}  // namespace

TEST_CASE("8-bit and smaller formats: every operand pair of add sub mul div matches MPFR", "[arith][mpfr]") {
  for (const char* name : kSmallFormats) {
    const Format& f = format(name);
    const auto pairs = all_pairs(f);
    Tally t;
    for (Op op : kBinaryOps)
      for (RoundingMode mode : kModes) check(op, f, mode, pairs, t);
    INFO(name);
    CHECK(t.checked == 4 * 6 * pairs.size());
    report(t);
  }
}

TEST_CASE("with DAZ and FTZ, every e4m3 and e5m2 pair and sampled binary16/32 match MPFR", "[arith][mpfr]") {
  for (const char* name : {"e4m3", "e5m2"}) {
    const Format& f = format(name);
    const auto pairs = all_pairs(f);
    Tally t;
    for (Op op : kBinaryOps)
      for (RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::up})
        check(op, f, mode, pairs, t, true);
    INFO(name);
    report(t);
  }
  for (const char* name : {"binary16", "binary32"}) {
    const Format& f = format(name);
    for (Op op : {Op::add, Op::mul, Op::div, Op::sqrt, Op::fma}) {
      const auto cases = sampled(f, op, 8000, 0xDA2 + std::uint64_t(op));
      Tally t;
      for (RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::down})
        check(op, f, mode, cases, t, true);
      INFO(name << " " << oracle::op_name(op));
      report(t);
    }
  }
}

TEST_CASE("8-bit and smaller formats: every sqrt matches MPFR", "[arith][mpfr]") {
  for (const char* name : kSmallFormats) {
    const Format& f = format(name);
    Tally t;
    for (RoundingMode mode : kModes) check(Op::sqrt, f, mode, all_singles(f), t);
    INFO(name);
    report(t);
  }
}

TEST_CASE("6- and 4-bit formats: every fma triple matches MPFR; 8-bit formats a sample", "[arith][mpfr]") {
  for (const char* name : kSmallFormats) {
    const Format& f = format(name);
    const auto cases = f.bits <= 6 ? all_triples(f) : sampled(f, Op::fma, 60000, 0xF3A + f.bits);
    Tally t;
    for (RoundingMode mode : kModes) check(Op::fma, f, mode, cases, t);
    INFO(name);
    report(t);
  }
}

TEST_CASE("wide formats: edge and random add sub mul div sqrt fma match MPFR", "[arith][mpfr]") {
  for (const char* name : kWideFormats) {
    const Format& f = format(name);
    for (Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::sqrt, Op::fma}) {
      const std::size_t count = op == Op::fma && f.name == "binary64" ? 60000 : 12000;
      const auto cases = sampled(f, op, count, 0xA11CE + std::uint64_t(op) * 131 + std::uint64_t(f.bits));
      Tally t;
      for (RoundingMode mode : kModes) check(op, f, mode, cases, t);
      INFO(name << " " << oracle::op_name(op));
      report(t);
    }
  }
}

TEST_CASE("binary64 fma is exact before its one rounding", "[arith][mpfr]") {
  const Format& f = formats::binary64();
  const auto bits = [](double d) {
    std::uint64_t u;
    std::memcpy(&u, &d, 8);
    return u;
  };
  // (1 + 2^-52)(1 - 2^-52) - 1 = -2^-104: only an exact product sees it.
  const Operands cancel = {bits(1 + 0x1p-52), bits(1 - 0x1p-52), bits(-1.0)};
  // A product below the smallest subnormal plus a tiny addend: the sticky
  // bits decide the directed roundings.
  const Operands tiny = {bits(0x1p-600), bits(0x1p-500), bits(-0x1p-1074)};
  // An addend 2^-200 below a product's last bit; and the reverse.
  const Operands far_below = {bits(1 + 0x1p-52), bits(1 + 0x1p-52), bits(0x1p-300)};
  const Operands far_above = {bits(0x1p-300), bits(0x1p-300), bits(1.0)};
  // Exact zero: signs follow the mode.
  const Operands zero = {bits(2.0), bits(3.0), bits(-6.0)};
  for (RoundingMode mode : kModes) {
    Tally t;
    check(Op::fma, f, mode, {cancel, tiny, far_below, far_above, zero}, t);
    report(t);
  }
  Rounding r;
  Flags fl = 0;
  CHECK(rpsim::fma(f, cancel[0], cancel[1], cancel[2], r, fl) == bits(-0x1p-104));
  CHECK(fl == 0);
  r.mode = RoundingMode::down;
  CHECK(rpsim::fma(f, zero[0], zero[1], zero[2], r, fl) == bits(-0.0));
}

TEST_CASE("the arithmetic oracle agrees with hand-worked cases", "[arith][mpfr]") {
  const Format& h = formats::binary16();
  const auto rne = RoundingMode::nearest_even;
  // 1 + 2^-11 (0x1000) is the midpoint between 1 and the next binary16.
  CHECK(oracle::arithmetic(Op::add, h, 0x3C00, 0x1000, 0, rne).bits == 0x3C00);
  CHECK(oracle::arithmetic(Op::add, h, 0x3C00, 0x1000, 0, RoundingMode::nearest_away).bits == 0x3C01);
  CHECK(oracle::arithmetic(Op::add, h, 0x3C00, 0x1000, 0, rne).flags == flag_inexact);
  // x - x is +0, except -0 rounding down.
  CHECK(oracle::arithmetic(Op::sub, h, 0x3C00, 0x3C00, 0, rne).bits == 0x0000);
  CHECK(oracle::arithmetic(Op::sub, h, 0x3C00, 0x3C00, 0, RoundingMode::down).bits == 0x8000);
  // 0/0 and sqrt(-1): the x86 default NaN (sign set); 1/0 raises divide-by-zero.
  CHECK(oracle::arithmetic(Op::div, h, 0, 0, 0, rne).bits == 0xFE00);
  CHECK(oracle::arithmetic(Op::sqrt, h, 0xBC00, 0, 0, rne).flags == flag_invalid);
  CHECK(oracle::arithmetic(Op::div, h, 0x3C00, 0, 0, rne).bits == 0x7C00);
  CHECK(oracle::arithmetic(Op::div, h, 0x3C00, 0, 0, rne).flags == flag_infinite);
  // A signalling NaN second operand: invalid, returned quieted.
  CHECK(oracle::arithmetic(Op::mul, h, 0x3C00, 0x7C01, 0, rne).bits == 0x7E01);
  CHECK(oracle::arithmetic(Op::mul, h, 0x3C00, 0x7C01, 0, rne).flags == flag_invalid);
  // E4M3FN: 256 + 256 = 512 > 448 overflows to NaN in RNE, saturates in RTZ.
  const Format& e4 = format("e4m3");
  CHECK(oracle::arithmetic(Op::add, e4, 0x78, 0x78, 0, rne).bits == 0x7F);
  CHECK(oracle::arithmetic(Op::add, e4, 0x78, 0x78, 0, RoundingMode::toward_zero).bits == 0x7E);
  // E2M1: 6 * 6 saturates to 6 (no NaN, no infinity).
  const Format& e2 = format("e2m1");
  CHECK(oracle::arithmetic(Op::mul, e2, 0x7, 0x7, 0, rne).bits == 0x7);
  CHECK(oracle::arithmetic(Op::mul, e2, 0x7, 0x7, 0, rne).flags == (flag_overflow | flag_inexact));
}

namespace {

// IEEE 754 5.11: NaN is unordered with everything; the signalling predicates
// raise invalid for any NaN, the quiet ones only for a signalling NaN.
struct ExpectedOrder {
  bool less = false, equal = false, unordered = false;
  bool signaling_nan = false;
};

ExpectedOrder expected_order(const Format& f, std::uint64_t a, std::uint64_t b) {
  const oracle::Decoded x = oracle::decode(f, a), y = oracle::decode(f, b);
  ExpectedOrder o;
  o.signaling_nan = x.kind == oracle::Kind::signaling_nan || y.kind == oracle::Kind::signaling_nan;
  if (x.is_nan() || y.is_nan()) {
    o.unordered = true;
    return o;
  }
  oracle::Real vx(64), vy(64);
  auto set = [&](mpfr_ptr v, const oracle::Decoded& d) {
    if (d.kind == oracle::Kind::infinity)
      mpfr_set_inf(v, d.sign ? -1 : 1);
    else
      oracle::set_exact(v, d);
  };
  set(vx, x);
  set(vy, y);
  const int c = mpfr_cmp(vx, vy);
  o.less = c < 0;
  o.equal = c == 0;
  return o;
}

std::string compare_note(const Format& f, const char* what, std::uint64_t a, std::uint64_t b) {
  std::ostringstream s;
  s << f.name << " " << what << std::hex << " 0x" << a << " 0x" << b;
  return s.str();
}

}  // namespace

TEST_CASE("comparisons of every 8-bit pair and sampled wide pairs match MPFR's order", "[arith][mpfr]") {
  for (const char* name : {"e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m2", "e2m1", "binary16", "bfloat16",
                           "binary32", "binary64"}) {
    const Format& f = format(name);
    const auto cases = f.bits <= 8 ? all_pairs(f) : sampled(f, Op::add, 20000, 0xC0 + std::uint64_t(f.bits));
    std::uint64_t failed = 0;
    std::vector<std::string> notes;
    for (const Operands& x : cases) {
      const ExpectedOrder want = expected_order(f, x[0], x[1]);
      const Flags quiet_inv = want.signaling_nan ? flag_invalid : 0;
      const Flags loud_inv = want.unordered || want.signaling_nan ? flag_invalid : 0;
      const struct {
        const char* what;
        bool (*fn)(const Format&, std::uint64_t, std::uint64_t, Flags&);
        bool want;
        Flags flags;
      } checks[] = {
          {"eq", rpsim::eq, want.equal, quiet_inv},
          {"le_quiet", rpsim::le_quiet, want.less || want.equal, quiet_inv},
          {"lt_quiet", rpsim::lt_quiet, want.less, quiet_inv},
          {"eq_signaling", rpsim::eq_signaling, want.equal, loud_inv},
          {"le", rpsim::le, want.less || want.equal, loud_inv},
          {"lt", rpsim::lt, want.less, loud_inv},
      };
      for (const auto& c : checks) {
        Flags fl = 0;
        if (c.fn(f, x[0], x[1], fl) != c.want || fl != c.flags) {
          ++failed;
          if (notes.size() < 8) notes.push_back(compare_note(f, c.what, x[0], x[1]));
        }
      }
    }
    std::string text;
    for (const auto& n : notes) text += "\n  " + n;
    INFO(failed << " of " << 6 * cases.size() << " comparisons differ:" << text);
    CHECK(failed == 0);
  }
}
