// The array functions against the scalar core, bit for bit: random values,
// every special value, every rounding boundary of binary16, every mode, FTZ,
// DAZ, overflow policies, NaN payloads, each kernel (AVX-512, AVX2,
// portable), and stochastic results independent of threads and chunking.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "array_reference.hpp"

using namespace rpsim;
using namespace rpsim::array_test;

TEST_CASE("array rounding equals the scalar core on random values, every format and mode", "[array]") {
  for (const char* name : tested_formats) {
    const Format fmt = parse_format(name);
    const auto in = random_inputs(fmt, 40000, 42);
    const auto in_f = to_floats(in, 43);
    for (RoundingMode mode : all_modes) {
      for (const ArrayOptions& o : rounding_variants(mode)) {
        check_against_reference(fmt, in, o);
        check_against_reference(fmt, in_f, o);
      }
    }
  }
}

TEST_CASE("array rounding equals the scalar core with binary64 output formats", "[array]") {
  const Format& fmt = formats::binary64();
  const auto in = random_inputs(fmt, 20000, 5);
  for (RoundingMode mode : all_modes) {
    for (const ArrayOptions& o : rounding_variants(mode)) check_against_reference(fmt, in, o);
  }
}

TEST_CASE("every kernel (AVX-512, AVX2, portable) equals the scalar core", "[array]") {
  for (ArrayIsa isa : {ArrayIsa::avx512, ArrayIsa::avx2, ArrayIsa::portable}) {
    for (const char* name : {"binary16", "bfloat16", "e4m3", "e5m2", "e2m1"}) {
      const Format& fmt = format(name);
      const auto in = random_inputs(fmt, 30000, 99);
      const auto in_f = to_floats(in, 98);
      for (RoundingMode mode : all_modes) {
        ArrayOptions o;
        o.rounding.mode = mode;
        o.isa = isa;
        o.seed = 3;
        check_against_reference(fmt, in, o);
        check_against_reference(fmt, in_f, o);
        o.rounding.flush_subnormal_outputs = true;
        check_against_reference(fmt, in, o);
      }
    }
  }
}

TEST_CASE("array rounding equals the scalar core on every special value", "[array]") {
  const auto floats = special_floats();
  for (const char* name : tested_formats) {
    const Format fmt = parse_format(name);
    const auto in = special_values(fmt);
    for (RoundingMode mode : all_modes) {
      for (const ArrayOptions& o : rounding_variants(mode)) {
        check_against_reference(fmt, in, o);
        check_against_reference(fmt, floats, o);
      }
    }
  }
}

TEST_CASE("array rounding equals the scalar core at every binary16 rounding boundary", "[array]") {
  // All midpoints between consecutive binary16 values (including the one
  // above the largest finite) and their binary64 neighbours, both signs.
  const Format& h = formats::binary16();
  std::vector<double> in;
  for (std::uint64_t b = 0; b <= 0x7BFF; ++b) {
    const double lo = to_double(h, b);
    const double hi = b == 0x7BFF ? 65536.0 : to_double(h, b + 1);
    const double mid = (lo + hi) / 2;  // exact in binary64
    for (double x : {lo, mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300)}) {
      in.push_back(x);
      in.push_back(-x);
    }
  }
  std::vector<float> in_f(in.begin(), in.end());  // binary16 midpoints are exact in binary32 too
  for (RoundingMode mode : all_modes) {
    for (const ArrayOptions& o : rounding_variants(mode)) {
      check_against_reference(h, in, o);
      check_against_reference(h, in_f, o);
    }
  }
}

TEST_CASE("fixed-point formats: every kernel equals the scalar core, grid ties and saturation included",
          "[array]") {
  // Word lengths from 2 to 51 (the kernel's range) and 52 (the scalar core's),
  // fraction lengths below, at and above the word length.
  const auto floats = special_floats();
  for (const char* name :
       {"q16.14", "q16.8", "q8.3", "q2.0", "q4.9", "q24.20", "q32.30", "q51.40", "q52.10"}) {
    const Format fmt = parse_format(name);
    std::vector<double> in = random_inputs(fmt, 8000, 17);
    for (double x : special_values(fmt)) in.push_back(x);
    // Every half and quarter grid step across the range and past both ends.
    std::mt19937_64 gen(11);
    const double quarter = std::ldexp(1.0, -fmt.frac_bits - 2);
    const std::int64_t span = std::int64_t(1) << std::min(fmt.bits + 2, 60);
    for (int i = 0; i < 8000; ++i) {
      const std::int64_t k = std::int64_t(gen() % std::uint64_t(2 * span)) - span;
      in.push_back(double(k) * quarter);
    }
    const auto in_f = to_floats(in, 19);
    for (ArrayIsa isa : {ArrayIsa::avx512, ArrayIsa::avx2, ArrayIsa::portable}) {
      for (RoundingMode mode : all_modes) {
        for (ArrayOptions o : rounding_variants(mode)) {
          o.isa = isa;
          check_against_reference(fmt, in, o);
          check_against_reference(fmt, in_f, o);
          check_against_reference(fmt, floats, o);
        }
      }
    }
  }
}

TEST_CASE("binary64 inputs that are binary32 values (vcvtps2ph's path to binary16) equal the scalar core",
          "[array]") {
  // Blocks with only binary32 values take the hardware conversion on AVX-512;
  // one block in four gets a value with more bits, a NaN or one beyond
  // binary32's range and goes back to the bit kernel.
  const Format& h = formats::binary16();
  std::vector<double> in;
  for (float f : to_floats(random_inputs(h, 40000, 61), 62))
    if (!std::isnan(f)) in.push_back(double(f));
  for (float f : special_floats())
    if (!std::isnan(f)) in.push_back(double(f));
  for (std::size_t b = 3 * 2048 + 5; b < in.size(); b += 4 * 2048)
    in[b] = b % 3 == 0 ? 1.0 / 3 : b % 3 == 1 ? std::nan("") : 1e300;
  for (RoundingMode mode : all_modes) {
    for (ArrayOptions o : rounding_variants(mode)) {
      check_against_reference(h, in, o);
      o.isa = ArrayIsa::avx2;
      check_against_reference(h, in, o);
    }
  }
}

TEST_CASE("stochastic rounding is the same for any thread count, chunking and kernel", "[array]") {
  const Format& fmt = formats::bfloat16();
  const std::size_t n = 300001;  // not a multiple of any block size
  const auto in = random_inputs(fmt, n, 7);
  ArrayOptions o;
  o.rounding.mode = RoundingMode::stochastic;
  o.seed = 2024;
  o.stream = 3;
  o.first_index = 77;
  o.threads = 1;
  std::vector<std::uint16_t> one(n), two(n), chunked(n), other_seed(n);
  round_to_bits(fmt, std::span<const double>(in), std::span<std::uint16_t>(one), o);
  std::string first;
  const auto mismatches = count_mismatches(in, one, reference_bits(fmt, in, o), first);
  INFO(first);
  CHECK(mismatches == 0);

  ArrayOptions o2 = o;
  o2.threads = 2;
  o2.parallel_threshold = 0;
  round_to_bits(fmt, std::span<const double>(in), std::span<std::uint16_t>(two), o2);
  CHECK(one == two);

  // Uneven chunks, each told where it starts.
  std::size_t begin = 0;
  for (std::size_t len : {std::size_t(1), std::size_t(1000), std::size_t(4097), std::size_t(123456)}) {
    ArrayOptions oc = o;
    oc.first_index = o.first_index + begin;
    round_to_bits(fmt, std::span<const double>(in).subspan(begin, len),
                  std::span<std::uint16_t>(chunked).subspan(begin, len), oc);
    begin += len;
  }
  ArrayOptions rest = o;
  rest.first_index = o.first_index + begin;
  round_to_bits(fmt, std::span<const double>(in).subspan(begin),
                std::span<std::uint16_t>(chunked).subspan(begin), rest);
  CHECK(one == chunked);

  for (ArrayIsa isa : {ArrayIsa::avx2, ArrayIsa::portable}) {
    ArrayOptions oi = o2;
    oi.isa = isa;
    std::vector<std::uint16_t> out(n);
    round_to_bits(fmt, std::span<const double>(in), std::span<std::uint16_t>(out), oi);
    INFO(array_kernel_isa(isa));
    CHECK(one == out);
  }

  // A different seed gives different roundings (the seed is used at all).
  ArrayOptions os = o;
  os.seed = 2025;
  round_to_bits(fmt, std::span<const double>(in), std::span<std::uint16_t>(other_seed), os);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) differ += one[i] != other_seed[i];
  CHECK(differ > n / 100);
}

TEST_CASE("decode equals convert() for every encoding of the small formats", "[array]") {
  for (const char* name : tested_formats) {
    const Format fmt = parse_format(name);
    if (fmt.bits > 16) continue;
    const std::size_t count = std::size_t(1) << fmt.bits;
    std::vector<std::uint16_t> bits(count);
    for (std::size_t i = 0; i < count; ++i) bits[i] = std::uint16_t(i);
    std::vector<double> out(count);
    decode(fmt, std::span<const std::uint16_t>(bits), std::span<double>(out));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i) {
      Flags f = 0;
      bad += bits_of(out[i]) != convert(formats::binary64(), fmt, i, Rounding{}, f);
    }
    INFO(name << " to binary64");
    CHECK(bad == 0);
    if (fmt.man_bits <= 23 && fmt.emax <= 127 && fmt.emin - fmt.man_bits >= -149) {
      std::vector<float> outf(count);
      decode(fmt, std::span<const std::uint16_t>(bits), std::span<float>(outf));
      bad = 0;
      for (std::size_t i = 0; i < count; ++i) {
        Flags f = 0;
        bad += std::bit_cast<std::uint32_t>(outf[i]) != convert(formats::binary32(), fmt, i, Rounding{}, f);
      }
      INFO(name << " to binary32");
      CHECK(bad == 0);
    }
    if (fmt.bits <= 8) {
      std::vector<std::uint8_t> b8(bits.begin(), bits.end());
      std::vector<double> out8(count);
      decode(fmt, std::span<const std::uint8_t>(b8), std::span<double>(out8));
      CHECK(std::memcmp(out8.data(), out.data(), count * sizeof(double)) == 0);
    }
  }
}

TEST_CASE("decode equals convert() on random binary32 and binary64 encodings", "[array]") {
  std::mt19937_64 gen(11);
  std::vector<std::uint32_t> b32(100000);
  std::vector<std::uint64_t> b64(100000);
  for (auto& b : b32) b = std::uint32_t(gen());
  for (auto& b : b64) b = gen();
  std::vector<double> out(b32.size());
  decode(formats::binary32(), std::span<const std::uint32_t>(b32), std::span<double>(out));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < b32.size(); ++i) {
    Flags f = 0;
    bad += bits_of(out[i]) != convert(formats::binary64(), formats::binary32(), b32[i], Rounding{}, f);
  }
  CHECK(bad == 0);
  decode(formats::binary64(), std::span<const std::uint64_t>(b64), std::span<double>(out));
  bad = 0;
  for (std::size_t i = 0; i < b64.size(); ++i) {
    Flags f = 0;
    bad += bits_of(out[i]) != convert(formats::binary64(), formats::binary64(), b64[i], Rounding{}, f);
  }
  CHECK(bad == 0);
}

TEST_CASE("array functions reject mismatched sizes, narrow outputs and bad options", "[array]") {
  std::vector<double> in(10, 1.0);
  std::vector<std::uint16_t> out16(9);
  std::vector<std::uint8_t> out8(10);
  std::vector<float> outf(10);
  std::vector<double> outd(10);
  CHECK_THROWS_WITH(
      round_to_bits(formats::binary16(), std::span<const double>(in), std::span<std::uint16_t>(out16)),
      Catch::Contains("10 elements, output 9"));
  CHECK_THROWS_WITH(
      round_to_bits(formats::binary16(), std::span<const double>(in), std::span<std::uint8_t>(out8)),
      Catch::Contains("16-bit format does not fit 8-bit"));
  std::vector<float> inf(10, 1.0f);
  CHECK_THROWS_WITH(round_values(formats::binary64(), std::span<const float>(inf), std::span<float>(outf)),
                    Catch::Contains("binary64"));
  ArrayOptions bad;
  bad.threads = -1;
  CHECK_THROWS_AS(
      round_values(formats::binary16(), std::span<const double>(in), std::span<double>(outd), bad),
      std::invalid_argument);
  std::vector<std::uint32_t> b32(10);
  CHECK_THROWS_WITH(decode(formats::binary64(), std::span<const std::uint32_t>(b32), std::span<float>(outf)),
                    Catch::Contains("binary64"));
}

TEST_CASE("array rounding equals the scalar core on 10^7 values per hot format and mode", "[array][long]") {
  for (const char* name : {"binary16", "bfloat16", "e4m3", "e5m2"}) {
    const Format& fmt = format(name);
    const auto in = random_inputs(fmt, 10000000, 1234);
    for (RoundingMode mode :
         {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::stochastic}) {
      ArrayOptions o;
      o.rounding.mode = mode;
      o.seed = 99;
      const auto want = reference_bits(fmt, in, o);
      std::vector<std::uint64_t> out(in.size());
      round_to_bits(fmt, std::span<const double>(in), std::span<std::uint64_t>(out), o);
      std::string first;
      const auto mismatches = count_mismatches(in, out, want, first);
      INFO(describe(fmt, o) << ": " << first);
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("binary32 input without subnormals (the hardware conversion paths) equals the scalar core",
          "[array]") {
  // vcvtneps2bf16 flushes subnormal inputs, so blocks holding one take the
  // bit kernel; these inputs have none, so whole blocks go to the instruction.
  std::mt19937_64 gen(17);
  std::vector<float> in(50000);
  for (std::size_t i = 0; i < in.size(); ++i) {
    std::uint32_t b = std::uint32_t(gen());
    if ((b & 0x7F800000u) == 0) b |= 0x00800000u;  // subnormal -> smallest binade
    in[i] = std::bit_cast<float>(b);
  }
  for (float x :
       {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::max(), 65504.0f, 65520.0f, 3.3895314e38f})
    in[gen() % in.size()] = x;
  for (RoundingMode mode : all_modes) {
    ArrayOptions o;
    o.rounding.mode = mode;
    o.seed = 8;
    check_against_reference(formats::binary16(), in, o);
    check_against_reference(formats::bfloat16(), in, o);
    o.rounding.nan_policy = NanPolicy::arm;
    check_against_reference(formats::bfloat16(), in, o);
  }
}
