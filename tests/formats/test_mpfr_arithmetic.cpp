// add sub mul div sqrt fma against MPFR: exhaustive over all operand pairs for
// the formats of 8 bits or fewer, edge cases plus random operands for the
// wider ones, in all six deterministic modes; result bits and flags.
#include <mpfr.h>
#include <catch2/catch.hpp>

#include "mpfr_arithmetic_cases.hpp"

using namespace rpsim;
using namespace rpsim::test;
using oracle::Op;

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

TEST_CASE("6- and 4-bit formats: every fma triple matches MPFR, 8-bit formats a sample", "[arith][mpfr]") {
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
