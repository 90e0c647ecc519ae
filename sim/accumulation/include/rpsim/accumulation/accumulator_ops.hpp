// The elementary operations of one accumulator (format + rounding mode) and
// the sequential dot product over them, one definition for the CPU
// (accumulation_arith.cpp, accumulation_sums.cpp) and the CUDA backend
// (RPSIM_HD): each result is the exact operation rounded once to the
// accumulator, on doubles that hold values of that format; fast native paths
// for binary32 and binary64 to nearest even, every other case through the
// formats core (round_pack). Stochastic rounding draws
// counter_random(seed, stream, index): products at even indices, additions at
// odd ones (accumulation_sums.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "rpsim/formats/format_desc.hpp"
#include "rpsim/formats/host_device.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/scalar_convert.hpp"

namespace rpsim::sim {

// How an accumulator computes: binary32 or binary64 to nearest even on the
// native operations, anything else through the formats core.
enum class AccumulatorPath : std::uint8_t { f32, f64, generic };

// One accumulator for one dot product (the stream keys its stochastic draws).
struct AccumulatorOps {
  FormatDesc format;
  RoundingMode mode = RoundingMode::nearest_even;
  std::uint64_t seed = 0, stream = 0;
  AccumulatorPath path = AccumulatorPath::generic;
};

struct AccumulatorSpec;  // accumulation.hpp
// The accumulator `spec` for the dot product keyed by `stream` (host side;
// accumulation_arith.cpp): the native path for binary32 / binary64 to
// nearest even.
AccumulatorOps accumulator_ops(const AccumulatorSpec& spec, std::uint64_t stream = 0);

namespace acc_detail {
RPSIM_HD_ABI_BEGIN

RPSIM_HD_INLINE RoundingDesc rounding_for(const AccumulatorOps& o, std::uint64_t index) {
  RoundingDesc r;
  r.mode = o.mode;
  if (r.mode == RoundingMode::stochastic) r.random_bits = counter_random(o.seed, o.stream, index);
  return r;
}

// x (any double) rounded to the accumulator.
RPSIM_HD_INLINE double round(const AccumulatorOps& o, double x, std::uint64_t index) {
  if (o.path == AccumulatorPath::f32) return static_cast<double>(static_cast<float>(x));
  if (o.path == AccumulatorPath::f64) return x;
  Flags f = 0;
  return hd::to_double(o.format, hd::round_binary64(o.format, x, rounding_for(o, index), f));
}

// a * b (any doubles), the exact product rounded once.
RPSIM_HD_INLINE double mul(const AccumulatorOps& o, double a, double b, std::uint64_t index) {
  if (o.path == AccumulatorPath::f64) return a * b;
  const double p = a * b;
  if (o.path == AccumulatorPath::f32) {
    // Exact in binary64 when a and b are binary32 values (24 + 24 bits).
    if (static_cast<double>(static_cast<float>(a)) == a && static_cast<double>(static_cast<float>(b)) == b)
      return static_cast<double>(static_cast<float>(p));
  }
  Flags f = 0;
  const RoundingDesc r = rounding_for(o, index);
  if (!hd::is_finite(p) || a == 0 || b == 0)
    return hd::to_double(o.format, hd::round_binary64(o.format, p, r, f));
  // The exact 106-bit product, rounded once.
  const FormatDesc b64 = hd::binary64_desc();
  const Unpacked ua = hd::unpack(b64, hd::bits_of(a)), ub = hd::unpack(b64, hd::bits_of(b));
  const hd::u128 prod = static_cast<hd::u128>(ua.significand) * ub.significand;
  return hd::to_double(
      o.format, hd::round_pack(o.format, ua.sign != ub.sign, ua.exponent + ub.exponent, prod, false, r, f));
}

// x + y (values of the format), rounded once.
RPSIM_HD_INLINE double add(const AccumulatorOps& o, double x, double y, std::uint64_t index) {
  if (o.path == AccumulatorPath::f32)
    return static_cast<double>(static_cast<float>(x) + static_cast<float>(y));
  if (o.path == AccumulatorPath::f64) return x + y;
  return hd::add_values(o.format, x, y, rounding_for(o, index));
}

// Recursive summation of the rounded products (`sequential:FMT:RND`): s = C
// rounded, then s = fl(s + fl(a_i * b_i)) for i in order.
template <class T>
RPSIM_HD_INLINE double sequential(const AccumulatorOps& o, const T* a, std::ptrdiff_t as, const T* b,
                                  std::ptrdiff_t bs, std::size_t k, double c) {
  double s = round(o, c, 2 * k + 1);
  for (std::size_t i = 0; i < k; ++i)
    s = add(o, s, mul(o, double(a[std::ptrdiff_t(i) * as]), double(b[std::ptrdiff_t(i) * bs]), 2 * i),
            2 * i + 1);
  return s;
}

RPSIM_HD_ABI_END
}  // namespace acc_detail
}  // namespace rpsim::sim
