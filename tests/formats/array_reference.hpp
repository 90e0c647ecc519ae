// The scalar-core references the array tests compare against, and their
// inputs: random values across each format's range, every special value,
// and the option variants (FTZ, DAZ, overflow, NaN policy, SR bit counts).
#pragma once

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "rpsim/formats/array.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"

namespace rpsim::array_test {

inline const RoundingMode all_modes[] = {
    RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero, RoundingMode::down,
    RoundingMode::up,           RoundingMode::odd,          RoundingMode::stochastic};

inline std::uint64_t bits_of(double x) {
  return std::bit_cast<std::uint64_t>(x);
}
inline double from_bits(std::uint64_t b) {
  return std::bit_cast<double>(b);
}

// The loop the array functions must reproduce.
inline std::vector<std::uint64_t> reference_bits(const Format& fmt, const std::vector<double>& in,
                                                 const ArrayOptions& o) {
  std::vector<std::uint64_t> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    Rounding r = o.rounding;
    r.random_bits = counter_random(o.seed, o.stream, o.first_index + i);
    Flags f = 0;
    out[i] = round_double(fmt, in[i], r, f);
  }
  return out;
}

inline std::vector<std::uint64_t> reference_bits(const Format& fmt, const std::vector<float>& in,
                                                 const ArrayOptions& o) {
  std::vector<std::uint64_t> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    Rounding r = o.rounding;
    r.random_bits = counter_random(o.seed, o.stream, o.first_index + i);
    Flags f = 0;
    out[i] = convert(fmt, formats::binary32(), std::bit_cast<std::uint32_t>(in[i]), r, f);
  }
  return out;
}

inline std::string describe(const Format& fmt, const ArrayOptions& o) {
  std::string s = fmt.name + " " + std::string(rounding_name(o.rounding.mode));
  if (o.rounding.flush_subnormal_inputs) s += " daz";
  if (o.rounding.flush_subnormal_outputs) s += " ftz";
  if (o.rounding.overflow) s += " overflow=" + std::to_string(int(*o.rounding.overflow));
  if (o.rounding.nan_policy != NanPolicy::x86_sse)
    s += " nan_policy=" + std::to_string(int(o.rounding.nan_policy));
  s += std::string(" kernel=") + array_kernel_isa(o.isa);
  return s;
}

template <class In>
inline std::string hex_input(In x) {
  char buf[40];
  if constexpr (std::is_same_v<In, double>) {
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(bits_of(x)));
  } else {
    std::snprintf(buf, sizeof buf, "%08x", std::bit_cast<std::uint32_t>(x));
  }
  return buf;
}

// Counts elements where `got` differs from `want`, describing the first.
template <class In, class T>
inline std::size_t count_mismatches(const std::vector<In>& in, const std::vector<T>& got,
                                    const std::vector<std::uint64_t>& want, std::string& first) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    std::uint64_t g;
    if constexpr (std::is_same_v<T, double>)
      g = bits_of(got[i]);
    else if constexpr (std::is_same_v<T, float>)
      g = std::bit_cast<std::uint32_t>(got[i]);
    else
      g = got[i];
    if (g != want[i]) {
      if (bad++ == 0) {
        first = "element " + std::to_string(i) + " input " + hex_input(in[i]) + ": want " +
                std::to_string(want[i]) + ", got " + std::to_string(g);
      }
    }
  }
  return bad;
}

// round_to_bits into the narrowest output type that fits, and into uint64;
// round_values too, where the format fits the value type.
template <class In>
inline void check_against_reference(const Format& fmt, const std::vector<In>& in, const ArrayOptions& o) {
  INFO(describe(fmt, o) << (std::is_same_v<In, double> ? " binary64 input" : " binary32 input"));
  const auto want = reference_bits(fmt, in, o);
  std::string first;
  {
    std::vector<std::uint64_t> out(in.size());
    round_to_bits(fmt, std::span<const In>(in), std::span<std::uint64_t>(out), o);
    const auto bad = count_mismatches(in, out, want, first);
    INFO("uint64 output: " << first);
    CHECK(bad == 0);
  }
  if (fmt.bits <= 8) {
    std::vector<std::uint8_t> out(in.size());
    round_to_bits(fmt, std::span<const In>(in), std::span<std::uint8_t>(out), o);
    const auto bad = count_mismatches(in, out, want, first);
    INFO("uint8 output: " << first);
    CHECK(bad == 0);
  } else if (fmt.bits <= 16) {
    std::vector<std::uint16_t> out(in.size());
    round_to_bits(fmt, std::span<const In>(in), std::span<std::uint16_t>(out), o);
    const auto bad = count_mismatches(in, out, want, first);
    INFO("uint16 output: " << first);
    CHECK(bad == 0);
  } else if (fmt.bits <= 32) {
    std::vector<std::uint32_t> out(in.size());
    round_to_bits(fmt, std::span<const In>(in), std::span<std::uint32_t>(out), o);
    const auto bad = count_mismatches(in, out, want, first);
    INFO("uint32 output: " << first);
    CHECK(bad == 0);
  }
  // Values: the reference is the decoded reference bits.
  const bool value_fits = std::is_same_v<In, double> ||
                          (fmt.man_bits <= 23 && fmt.emax <= 127 && fmt.emin - fmt.man_bits >= -149);
  if (value_fits) {
    const Format& wide = std::is_same_v<In, double> ? formats::binary64() : formats::binary32();
    std::vector<std::uint64_t> want_values(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      Flags f = 0;
      want_values[i] = convert(wide, fmt, want[i], Rounding{}, f);
    }
    std::vector<In> out(in.size());
    round_values(fmt, std::span<const In>(in), std::span<In>(out), o);
    auto bad = count_mismatches(in, out, want_values, first);
    INFO("values: " << first);
    CHECK(bad == 0);
    // In place.
    std::vector<In> inout = in;
    round_values(fmt, std::span<const In>(inout), std::span<In>(inout), o);
    bad = count_mismatches(in, inout, want_values, first);
    INFO("values in place: " << first);
    CHECK(bad == 0);
  }
}

// Uniform (-1, 1), log-uniform magnitudes across the format's whole range
// and beyond (subnormals, underflow, overflow), and raw bit patterns (NaN
// payloads, infinities, binary64 subnormals).
inline std::vector<double> random_inputs(const Format& fmt, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  const int lo = std::max(-1070, fmt.emin - fmt.man_bits - 4), hi = std::min(1023, fmt.emax + 3);
  std::uniform_real_distribution<double> expo(lo, hi);
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0: v[i] = unit(gen); break;
      case 1:
      case 2: {
        const double m = std::exp2(expo(gen));
        v[i] = (gen() & 1) ? -m : m;
        break;
      }
      default: v[i] = from_bits(gen()); break;
    }
  }
  return v;
}

inline std::vector<float> to_floats(const std::vector<double>& v, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    // Every fourth: raw binary32 patterns (payloads, subnormals).
    f[i] = i % 4 == 3 ? std::bit_cast<float>(std::uint32_t(gen())) : float(v[i]);
  }
  return f;
}

// Specials of binary64 and of the format: zeros, subnormal limits, max, just
// above max, midpoints at both ends of the range and their neighbours,
// infinities, NaNs with payloads.
inline std::vector<double> special_values(const Format& fmt) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> base = {0.0,
                              std::numeric_limits<double>::denorm_min(),
                              std::numeric_limits<double>::min() / 2,
                              std::nextafter(std::numeric_limits<double>::min(), 0.0),
                              std::numeric_limits<double>::min(),
                              std::numeric_limits<double>::max(),
                              inf,
                              1.0,
                              fmt.max_finite(),
                              fmt.min_normal(),
                              fmt.min_positive()};
  const double mp = fmt.min_positive(), mx = fmt.max_finite();
  const double ulp_max = std::ldexp(1.0, fmt.emax - fmt.man_bits);
  for (double x :
       {mp / 2, mp / 4, mp * 1.5, mp * 2.5, mx + ulp_max / 2, mx + ulp_max, mx * 2, mx + ulp_max / 4,
        fmt.min_normal() - mp / 2, fmt.min_normal() * (1 - std::ldexp(1.0, -fmt.man_bits - 2))})
    base.push_back(x);
  std::vector<double> v;
  for (double x : base) {
    for (double y : {x, std::nextafter(x, 0.0), std::nextafter(x, inf)}) {
      v.push_back(y);
      v.push_back(-y);
    }
  }
  for (std::uint64_t payload : {0ull, 1ull, 0x5555555555555ull, 0x4000000000000ull, 0x7FFFFFFFFFFFFull,
                                0xFFFFFFFFFFFFFull, 0x8000000000000ull, 0x0000000000400ull}) {
    for (std::uint64_t sign : {0ull, 1ull << 63}) {
      const std::uint64_t b = sign | 0x7FF0000000000000ull | payload;
      if ((b & 0xFFFFFFFFFFFFFull) != 0) v.push_back(from_bits(b));
    }
  }
  return v;
}

inline std::vector<float> special_floats() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v;
  for (float x : {0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::min() / 2, std::numeric_limits<float>::max(), inf, 1.0f,
                  65504.0f, 65520.0f, 448.0f, 464.0f, 57344.0f, 61440.0f, 5.9604645e-8f, 2.9802322e-8f}) {
    for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, inf)}) {
      v.push_back(y);
      v.push_back(-y);
    }
  }
  for (std::uint32_t payload : {1u, 0x155555u, 0x200000u, 0x3FFFFFu, 0x400000u, 0x7FFFFFu, 0x2000u}) {
    v.push_back(std::bit_cast<float>(0x7F800000u | payload));
    v.push_back(std::bit_cast<float>(0xFF800000u | payload));
  }
  return v;
}

inline std::vector<ArrayOptions> rounding_variants(RoundingMode mode) {
  std::vector<ArrayOptions> out;
  ArrayOptions o;
  o.rounding.mode = mode;
  o.seed = 12345;
  o.stream = 7;
  o.first_index = 1000;
  out.push_back(o);
  ArrayOptions ftz = o;
  ftz.rounding.flush_subnormal_outputs = true;
  out.push_back(ftz);
  ArrayOptions daz = o;
  daz.rounding.flush_subnormal_inputs = true;
  out.push_back(daz);
  ArrayOptions sat = o;
  sat.rounding.overflow = Overflow::saturate;
  out.push_back(sat);
  ArrayOptions riscv = o;
  riscv.rounding.nan_policy = NanPolicy::riscv;
  out.push_back(riscv);
  if (mode == RoundingMode::stochastic) {
    for (int k : {1, 5, 13, 24, 53, 62, 64}) {
      ArrayOptions sr = o;
      sr.rounding.stochastic_bits = k;
      out.push_back(sr);
    }
  }
  return out;
}

// Each representable value (every `stride`-th encoding, and every one in the
// lowest and highest 2^(m+2) encodings), the midpoint above it, and the
// binary64 neighbours of both, with both signs.
inline std::vector<double> boundaries(const Format& fmt, std::uint64_t stride) {
  const std::uint64_t top = fmt.max_finite_bits(false), edge = std::uint64_t(4) << fmt.man_bits;
  std::vector<double> in;
  for (std::uint64_t b = 0; b <= top; b += (b < edge || b + edge > top) ? 1 : stride) {
    const double lo = to_double(fmt, b);
    const double hi = b == top ? lo + std::ldexp(1.0, fmt.emax - fmt.man_bits) : to_double(fmt, b + 1);
    const double mid = (lo + hi) / 2;  // exact in binary64
    for (double x : {lo, std::nextafter(lo, 0.0), std::nextafter(lo, 1e300), mid, std::nextafter(mid, 0.0),
                     std::nextafter(mid, 1e300)}) {
      in.push_back(x);
      in.push_back(-x);
    }
  }
  return in;
}

// The same boundaries in binary32 (every format value and midpoint here is
// a binary32 value), with their binary32 neighbours.
inline std::vector<float> boundaries_binary32(const std::vector<double>& in) {
  std::vector<float> out;
  for (double x : in) {
    const float f = float(x);
    for (float y : {f, std::nextafter(f, 0.0f), std::nextafter(f, 1e30f)}) out.push_back(y);
  }
  return out;
}

inline const char* const tested_formats[] = {
    "binary16", "bfloat16", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m2",
    "e2m3",     "e2m1",     "e8m0", "tf32", "binary32", "e6m5",     "exp=3,man=4,bias=5"};

}  // namespace rpsim::array_test
