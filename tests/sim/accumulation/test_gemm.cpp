// sim::round_to_format (gemm.cpp: rpsim.gemm's input rounding, the
// validation's expected outputs) against the scalar core element by element.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/rounding.hpp"

using namespace rpsim;

namespace {

std::uint64_t bits_of(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

}  // namespace

TEST_CASE("accumulation: round_to_format is the scalar core's rounding of each entry, inf and NaN kept",
          "[accumulation]") {
  // 70,000 entries: above the array kernel's threshold for threads. Every
  // magnitude from 2^-1100 to 2^1000, zeros of both signs, infinities and
  // a NaN with a payload (kept bit for bit, as the scalar loop copied it).
  sim::Matrix m(350, 200);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double u = double(counter_random(7, 1, std::uint64_t(i)) >> 11) / 9007199254740992.0;
    m.data()[i] = std::ldexp(1.0 + u, int(i * 97 % 2100) - 1100) * (i % 3 ? 1 : -1);
  }
  std::uint64_t payload = 0x7ff4000000000123ull;  // a signalling NaN's bits
  std::memcpy(m.data() + 5, &payload, sizeof payload);
  m(7) = std::numeric_limits<double>::infinity();
  m(8) = -std::numeric_limits<double>::infinity();
  m(9) = 0.0;
  m(10) = -0.0;
  const Format* formats_under_test[] = {&formats::binary16(), &formats::bfloat16(), &formats::e4m3(),
                                        &formats::binary32(), &formats::binary64()};
  for (const Format* f : formats_under_test)
    for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::up,
                                    RoundingMode::stochastic}) {
      INFO(f->name << " mode " << int(mode));
      const sim::Matrix got = sim::round_to_format(m, *f, mode, 99);
      std::int64_t differing = 0;
      for (Eigen::Index i = 0; i < m.size(); ++i) {
        const double x = m.data()[i];
        double want = x;
        if (std::isfinite(x)) {
          Rounding r;
          r.mode = mode;
          r.random_bits = counter_random(99, 0, std::uint64_t(i));
          Flags flags = 0;
          want = to_double(*f, round_double(*f, x, r, flags));
        }
        differing += bits_of(got.data()[i]) != bits_of(want);
      }
      CHECK(differing == 0);
    }
}
