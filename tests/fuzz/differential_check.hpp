// The comparison step of the differential fuzzers: runs one case through the
// formats core and the MPFR reference, aborts with the case printed on a
// mismatch, and counts the cases that agreed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mpfr_reference.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::fuzz {

inline std::uint64_t width_mask(const Format& f) {
  const int w = int(f.has_sign) + f.exp_bits + f.man_bits;
  return w >= 64 ? ~0ull : (1ull << w) - 1;
}

inline std::uint64_t g_cases = 0;  // cases that agreed with the reference
inline std::uint64_t g_next_report = 1 << 20;
inline bool g_mismatch = false;

inline void report_count() {
  std::fprintf(stderr, "differential: %llu cases checked, %s\n", static_cast<unsigned long long>(g_cases),
               g_mismatch ? "then a MISMATCH" : "0 mismatches");
}

[[noreturn]] inline void mismatch(RefOp op, const Format& f, const Format& from, const std::uint64_t* x,
                                  const Rounding& r, std::uint64_t got, Flags got_flags,
                                  const RefResult& want) {
  std::fprintf(stderr,
               "MISMATCH %s format=%s from=%s rounding=%s daz=%d ftz=%d overflow=%d operands=%llx %llx %llx\n"
               "  core: %llx flags %02x\n  mpfr: %s%llx flags %02x\n",
               ref_op_name(op), f.name.c_str(), from.name.c_str(), std::string(rounding_name(r.mode)).c_str(),
               r.flush_subnormal_inputs, r.flush_subnormal_outputs, r.overflow ? int(*r.overflow) : -1,
               static_cast<unsigned long long>(x[0]), static_cast<unsigned long long>(x[1]),
               static_cast<unsigned long long>(x[2]), static_cast<unsigned long long>(got), got_flags,
               want.nan ? "NaN " : "", static_cast<unsigned long long>(want.bits), want.flags);
  g_mismatch = true;
  report_count();
  std::abort();
}

inline void check(Reference& ref, RefOp op, const Format& f, const Format& from, const std::uint64_t* x,
                  const Rounding& r) {
  Flags fl = 0;
  std::uint64_t got = 0;
  switch (op) {
    case RefOp::add: got = rpsim::add(f, x[0], x[1], r, fl); break;
    case RefOp::sub: got = rpsim::sub(f, x[0], x[1], r, fl); break;
    case RefOp::mul: got = rpsim::mul(f, x[0], x[1], r, fl); break;
    case RefOp::div: got = rpsim::div(f, x[0], x[1], r, fl); break;
    case RefOp::sqrt: got = rpsim::sqrt(f, x[0], r, fl); break;
    case RefOp::fma: got = rpsim::fma(f, x[0], x[1], x[2], r, fl); break;
    case RefOp::convert: got = rpsim::convert(f, from, x[0], r, fl); break;
    case RefOp::eq: got = rpsim::eq(f, x[0], x[1], fl); break;
    case RefOp::le: got = rpsim::le(f, x[0], x[1], fl); break;
    case RefOp::lt: got = rpsim::lt(f, x[0], x[1], fl); break;
    case RefOp::eq_signaling: got = rpsim::eq_signaling(f, x[0], x[1], fl); break;
    case RefOp::le_quiet: got = rpsim::le_quiet(f, x[0], x[1], fl); break;
    case RefOp::lt_quiet: got = rpsim::lt_quiet(f, x[0], x[1], fl); break;
  }
  const RefResult want = ref.compute(op, f, from, x, r);
  bool same = fl == want.flags;
  if (want.nan) {
    mpfr_t scratch;
    mpfr_init2(scratch, 64);
    const auto kind = Reference::decode(f, got, false, scratch);
    mpfr_clear(scratch);
    same = same && (kind == Kind::quiet_nan || kind == Kind::signaling_nan) && (got & ~width_mask(f)) == 0;
  } else {
    same = same && got == want.bits;
  }
  if (!same) mismatch(op, f, from, x, r, got, fl, want);
  if (++g_cases >= g_next_report) {
    report_count();
    g_next_report *= 2;
  }
}

}  // namespace rpsim::fuzz
