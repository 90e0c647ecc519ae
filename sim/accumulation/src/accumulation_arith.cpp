// Correctly rounded accumulator operations (see accumulation_arith.hpp).
#include "accumulation_arith.hpp"
#include "rpsim/formats/unpacked.hpp"

#include <bit>
#include <cmath>

#include "rpsim/accumulation/exact_accumulator.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"

namespace rpsim::sim::acc_detail {

Arith::Arith(const AccumulatorSpec& spec, std::uint64_t stream)
    : fmt_(&spec.format), seed_(spec.seed), stream_(stream) {
  rnd_.mode = spec.rounding;
  const bool rne = spec.rounding == RoundingMode::nearest_even;
  if (rne && spec.format == formats::binary32()) {
    path_ = Path::f32;
  } else if (rne && spec.format == formats::binary64()) {
    path_ = Path::f64;
  } else {
    path_ = Path::generic;
  }
}

Rounding Arith::rounding_for(std::uint64_t index) const {
  Rounding r = rnd_;
  if (r.mode == RoundingMode::stochastic) r.random_bits = counter_random(seed_, stream_, index);
  return r;
}

double Arith::round(double x, std::uint64_t index) const {
  switch (path_) {
    case Path::f32: return static_cast<double>(static_cast<float>(x));
    case Path::f64: return x;
    case Path::generic: break;
  }
  Flags f = 0;
  return to_double(*fmt_, round_double(*fmt_, x, rounding_for(index), f));
}

double Arith::mul(double a, double b, std::uint64_t index) const {
  if (path_ == Path::f64) return a * b;
  const double p = a * b;
  if (path_ == Path::f32) {
    // Exact in binary64 when a and b are binary32 values (24 + 24 bits).
    if (static_cast<double>(static_cast<float>(a)) == a && static_cast<double>(static_cast<float>(b)) == b)
      return static_cast<double>(static_cast<float>(p));
  }
  Flags f = 0;
  const Rounding r = rounding_for(index);
  if (!std::isfinite(p) || a == 0 || b == 0) return to_double(*fmt_, round_double(*fmt_, p, r, f));
  // The exact 106-bit product, rounded once.
  std::uint64_t ma, mb;
  int ea, eb;
  split_binary64(a, ma, ea);
  split_binary64(b, mb, eb);
  const u128 prod = static_cast<u128>(ma) * mb;
  return to_double(*fmt_, round_pack(*fmt_, std::signbit(a) != std::signbit(b), ea + eb, prod, false, r, f));
}

double Arith::add(double x, double y, std::uint64_t index) const {
  switch (path_) {
    case Path::f32: return static_cast<double>(static_cast<float>(x) + static_cast<float>(y));
    case Path::f64: return x + y;
    case Path::generic: break;
  }
  Flags f = 0;
  const Rounding r = rounding_for(index);
  const Rounding exact;  // x, y are values of the format: encoding them is exact
  Flags ignored = 0;
  const std::uint64_t xb = round_double(*fmt_, x, exact, ignored);
  const std::uint64_t yb = round_double(*fmt_, y, exact, ignored);
  return to_double(*fmt_, rpsim::add(*fmt_, xb, yb, r, f));
}

double Arith::fma(double a, double b, double s, std::uint64_t index) const {
  if (path_ == Path::f64) return std::fma(a, b, s);
  if (path_ == Path::f32) {
    const float fa = static_cast<float>(a), fb = static_cast<float>(b), fs = static_cast<float>(s);
    if (fa == a && fb == b && fs == s) return static_cast<double>(std::fma(fa, fb, fs));
  }
  // General case: the exact a*b + s, rounded once.
  if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(s)) return round(a * b + s, index);
  ExactAccumulator acc;
  acc.add_product(a, b);
  acc.add(s);
  Flags f = 0;
  return to_double(*fmt_, acc.round(*fmt_, rounding_for(index), f));
}

}  // namespace rpsim::sim::acc_detail
