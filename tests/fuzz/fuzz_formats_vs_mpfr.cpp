// Differential fuzzer: the formats core (ops.hpp) against the MPFR reference
// in mpfr_reference.hpp, for every operation, every named format (plus a few
// custom specs) and every deterministic rounding mode.
//
// One input is a sequence of 28-byte records. Each record names a format, an
// operation, a conversion target, options (DAZ, FTZ, overflow override) and
// three operand patterns; it expands into kVariants operand sets (the
// record's own and ones derived from it: special values, the same or a nearby
// exponent, neighbours, negations, which reach ties, cancellation and
// overflow far more often than random bits) and each set runs in all six
// deterministic modes. A mismatch prints the case and aborts, so libFuzzer
// keeps the input. The number of cases checked is printed as it grows.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "differential_check.hpp"
#include "formats_under_test.hpp"
#include "mpfr_reference.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/rounding.hpp"

namespace {

using rpsim::Format;
using rpsim::fuzz::check;
using rpsim::fuzz::RefOp;

constexpr int kVariants = 12;
constexpr std::size_t kRecordBytes = 28;
constexpr rpsim::RoundingMode kModes[] = {
    rpsim::RoundingMode::nearest_even, rpsim::RoundingMode::nearest_away, rpsim::RoundingMode::toward_zero,
    rpsim::RoundingMode::down,         rpsim::RoundingMode::up,           rpsim::RoundingMode::odd};

// Custom specs beside the named table: odd widths, no subnormals, an fn and
// a finite-only variant, an explicit bias, an unsigned format with zero, and
// fixed point (Gupta et al.'s q16.14, a fraction longer than the word, the
// narrowest word, the widest).
const char* const kCustomSpecs[] = {"e3m4",
                                    "e6m9",
                                    "e5m3fn",
                                    "e3m3fnuz",
                                    "e4m5f",
                                    "exp=4,man=3,subnormals=no",
                                    "exp=5,man=6,bias=9",
                                    "exp=4,man=2,sign=no,nonfinite=finite_only",
                                    "e11m40",
                                    "q16.14",
                                    "q8.3",
                                    "q12.20",
                                    "q2.0",
                                    "q53.30"};

const std::vector<const Format*>& formats_under_test() {
  static const std::vector<const Format*> list = rpsim::fuzz::named_and_custom_formats(kCustomSpecs);
  return list;
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

using rpsim::fuzz::width_mask;

// A special or boundary encoding of f, by index.
std::uint64_t special(const Format& f, unsigned index) {
  const std::uint64_t sign = f.has_sign ? 1ull << (f.exp_bits + f.man_bits) : 0;
  const std::uint64_t man_all = (1ull << f.man_bits) - 1;
  const std::uint64_t field_all = (1ull << f.exp_bits) - 1;
  const std::uint64_t one_field = std::uint64_t(f.bias);
  const std::uint64_t table[] = {
      0,                                                                          // +0 (or the smallest E8M0)
      1,                                                                          // smallest subnormal
      man_all,                                                                    // largest subnormal
      1ull << f.man_bits,                                                         // smallest normal
      (one_field << f.man_bits),                                                  // 1.0
      (one_field << f.man_bits) | man_all,                                        // just below 2
      (field_all << f.man_bits),                                                  // inf (IEEE)
      (field_all << f.man_bits) | man_all,                                        // NaN / max finite
      ((field_all - 1) << f.man_bits) | man_all,                                  // max finite (IEEE)
      ((field_all) << f.man_bits) | (man_all >> 1),                               // signalling NaN (IEEE)
      ((field_all) << f.man_bits) | (1ull << (f.man_bits ? f.man_bits - 1 : 0)),  // quiet NaN
      ((field_all - 1) << f.man_bits) | (man_all - (man_all > 0)),
  };
  constexpr unsigned n = sizeof(table) / sizeof(table[0]);
  return (table[index % n] | ((index / n) & 1 ? sign : 0)) & width_mask(f);
}

// Derives operand k of variant v from the record's operands.
std::uint64_t derive(const Format& f, const std::uint64_t* base, int k, std::uint64_t& rng) {
  const std::uint64_t mask = width_mask(f);
  const std::uint64_t r = splitmix64(rng);
  const std::uint64_t sign = f.has_sign ? 1ull << (f.exp_bits + f.man_bits) : 0;
  const std::uint64_t man_all = (1ull << f.man_bits) - 1;
  const std::uint64_t field_all = (1ull << f.exp_bits) - 1;
  const std::uint64_t other = base[k == 0 ? 1 : 0];
  const std::uint64_t other_field = (other >> f.man_bits) & field_all;
  const std::uint64_t random_man = splitmix64(rng) & man_all;
  const std::uint64_t random_sign = (r >> 8) & 1 ? sign : 0;
  switch (r & 7) {
    case 0: return splitmix64(rng) & mask;
    case 1: return special(f, unsigned(r >> 16));
    case 2: return (random_sign | (other_field << f.man_bits) | random_man) & mask;
    case 3: {  // a nearby exponent: within p + 3 of the other operand's
      const std::int64_t delta = std::int64_t((r >> 16) % (2 * (f.man_bits + 4) + 1)) - (f.man_bits + 4);
      std::int64_t field = std::int64_t(other_field) + delta;
      if (field < 0) field = 0;
      if (field > std::int64_t(field_all)) field = std::int64_t(field_all);
      return (random_sign | (std::uint64_t(field) << f.man_bits) | random_man) & mask;
    }
    case 4: return (other + ((r >> 16) & 3) - 1) & mask;    // a neighbour
    case 5: return (other ^ sign) & mask;                   // the negation: cancellation
    case 6: return (other ^ ((r >> 16) & man_all)) & mask;  // same exponent, few bits changed
    default: return base[k] & mask;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static rpsim::fuzz::Reference ref;
  static const bool registered = [] { return std::atexit(rpsim::fuzz::report_count) == 0; }();
  (void)registered;
  const auto& fmts = formats_under_test();
  for (std::size_t at = 0; at + kRecordBytes <= size; at += kRecordBytes) {
    const std::uint8_t* rec = data + at;
    const Format& f = *fmts[rec[0] % fmts.size()];
    const RefOp op = RefOp(rec[1] % rpsim::fuzz::kRefOpCount);
    const Format& other = *fmts[rec[2] % fmts.size()];
    const std::uint8_t options = rec[3];
    std::uint64_t base[3];
    std::uint64_t rng = 0;
    for (int k = 0; k < 3; ++k) {
      std::uint64_t v = 0;
      for (int i = 0; i < 8; ++i) v = v << 8 | rec[4 + 8 * k + i];
      base[k] = v;
      rng = rng * 0x100000001B3ull ^ v;
    }
    rng ^= std::uint64_t(rec[0]) << 56 | std::uint64_t(rec[1]) << 48 | std::uint64_t(options) << 40;
    // A conversion computes `other` -> f: operands are encodings of `other`.
    const Format& in = op == RefOp::convert ? other : f;
    rpsim::Rounding r;
    r.flush_subnormal_inputs = options & 1;
    r.flush_subnormal_outputs = (options >> 1) & 1;
    switch ((options >> 2) & 7) {
      case 1: r.overflow = rpsim::Overflow::infinity; break;
      case 2: r.overflow = rpsim::Overflow::nan; break;
      case 3: r.overflow = rpsim::Overflow::saturate; break;
      default: break;  // mostly the format's own behaviour
    }
    const std::uint64_t in_mask = width_mask(in);
    for (int v = 0; v < kVariants; ++v) {
      std::uint64_t x[3];
      for (int k = 0; k < 3; ++k) x[k] = v == 0 ? base[k] & in_mask : derive(in, base, k, rng);
      for (rpsim::RoundingMode mode : kModes) {
        r.mode = mode;
        check(ref, op, f, in, x, r);
      }
    }
  }
  return 0;
}
