// Comparisons (eq, le, lt, signalling and quiet) against MPFR's order: every
// operand pair of the formats of 8 bits or fewer, samples of the wider ones.
#include <mpfr.h>
#include <catch2/catch.hpp>

#include "mpfr_arithmetic_cases.hpp"

using namespace rpsim;
using namespace rpsim::test;
using oracle::Op;

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
