// device-arith: the scalar rounding core as nvcc compiles it (device_arith.cu,
// the code the CUDA kernels run) against the CPU core: the scalar path (the
// same source built by the host compiler), the SIMD array paths
// (round_to_bits, AVX-512 / AVX2 where the CPU has them) and MPFR, at every
// rounding boundary of each format (a binary64 ulp either side of every
// value and midpoint), in every mode with FTZ, DAZ, saturation, the RISC-V
// NaN policy and stochastic rounding's bit counts, flags included.
#include <bit>
#include <catch2/catch.hpp>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "../../formats/array_reference.hpp"
#include "device_arith.hpp"
#include "mpfr_oracle.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"

using namespace rpsim;
using namespace rpsim::array_test;

namespace {

// The formats every mode is checked in; boundaries() enumerates each one's
// encodings (every 11th above 8 bits, all of them in the lowest and highest
// 2^(m+2)), random and special values cover binary32 and the custom rows.
const char* const boundary_formats[] = {"binary16", "bfloat16", "e4m3", "e5m2",   "e4m3fnuz",
                                        "e5m2fnuz", "e3m2",     "e2m3", "e2m1",   "e8m0",
                                        "tf32",     "e6m5",     "q8.3", "q16.14", "exp=3,man=4,bias=5"};

struct Counts {
  std::size_t values = 0, mismatches = 0;
  std::string first;
};

void note(Counts& n, bool ok, const std::string& what) {
  ++n.values;
  if (!ok && n.mismatches++ == 0) n.first = what;
}

std::vector<double> inputs_for(const Format& fmt) {
  std::vector<double> in = fmt.bits <= 16 && !fmt.is_fixed_point() ? boundaries(fmt, fmt.bits > 8 ? 11 : 1)
                                                                   : random_inputs(fmt, 20000, 5);
  for (double x : special_values(fmt)) in.push_back(x);
  return in;
}

// nvcc's build and the CPU's scalar core on one input; the array path on the
// whole vector is compared by the caller.
template <class In>
void compare_scalar(const Format& fmt, const std::vector<In>& in, const ArrayOptions& o, Counts& n,
                    std::vector<std::uint64_t>& device_bits) {
  device_bits.resize(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    Rounding r = o.rounding;
    r.random_bits = counter_random(o.seed, o.stream, o.first_index + i);
    Flags cpu_flags = 0, dev_flags = 0;
    std::uint64_t cpu, dev;
    if constexpr (std::is_same_v<In, double>) {
      cpu = round_double(fmt, in[i], r, cpu_flags);
      dev = device_arith::round_binary64(fmt, in[i], rounding_desc(r), dev_flags);
    } else {
      cpu = convert(fmt, formats::binary32(), std::bit_cast<std::uint32_t>(in[i]), r, cpu_flags);
      dev = device_arith::round_binary32(fmt, in[i], rounding_desc(r), dev_flags);
    }
    device_bits[i] = dev;
    note(n, cpu == dev && cpu_flags == dev_flags,
         describe(fmt, o) + " input " + hex_input(in[i]) + ": cpu " + std::to_string(cpu) + " flags " +
             std::to_string(cpu_flags) + ", nvcc " + std::to_string(dev) + " flags " +
             std::to_string(dev_flags));
  }
}

template <class In>
void compare_array(const Format& fmt, const std::vector<In>& in, const ArrayOptions& o,
                   const std::vector<std::uint64_t>& device_bits, Counts& n) {
  std::vector<std::uint64_t> out(in.size());
  round_to_bits(fmt, std::span<const In>(in), std::span<std::uint64_t>(out), o);
  for (std::size_t i = 0; i < in.size(); ++i)
    note(n, out[i] == device_bits[i], describe(fmt, o) + " array path, input " + hex_input(in[i]));
}

}  // namespace

TEST_CASE("device-arith: the shared code under test is nvcc's build", "[device-arith]") {
  CHECK(std::string(device_arith::compiled_by()) == "nvcc");
  for (std::uint64_t i : {0ull, 1ull, 1ull << 40, ~0ull})
    CHECK(device_arith::counter_random(12345, 7, i) == counter_random(12345, 7, i));
}

TEST_CASE(
    "device-arith: every format and mode at every rounding boundary equals the CPU core and its array paths",
    "[device-arith]") {
  Counts scalar, array;
  for (const char* name : boundary_formats) {
    const Format fmt = parse_format(name);
    const auto in = inputs_for(fmt);
    const auto in_f = boundaries_binary32(in);
    for (RoundingMode mode : all_modes)
      for (const ArrayOptions& o : rounding_variants(mode)) {
        std::vector<std::uint64_t> dev;
        compare_scalar(fmt, in, o, scalar, dev);
        compare_array(fmt, in, o, dev, array);
        compare_scalar(fmt, in_f, o, scalar, dev);
        compare_array(fmt, in_f, o, dev, array);
      }
  }
  INFO("first scalar mismatch: " << scalar.first);
  INFO("first array mismatch: " << array.first);
  CHECK(scalar.values > 20'000'000);
  CHECK(scalar.mismatches == 0);
  CHECK(array.mismatches == 0);
  std::cout << "device-arith rounding: " << scalar.values << " values against the scalar core and the "
            << array_kernel_isa() << " array path, " << scalar.mismatches + array.mismatches << " mismatches"
            << std::endl;
}

TEST_CASE("device-arith: deterministic modes at every rounding boundary equal MPFR", "[device-arith]") {
  Counts n;
  for (const char* name : boundary_formats) {
    const Format fmt = parse_format(name);
    if (fmt.is_fixed_point()) continue;  // the oracle models floating-point rows
    for (RoundingMode mode : all_modes) {
      if (mode == RoundingMode::stochastic) continue;
      for (const bool ftz : {false, true}) {
        RoundingDesc r;
        r.mode = mode;
        r.flush_subnormal_outputs = ftz;
        oracle::Options opt;
        opt.flush_subnormal_outputs = ftz;
        for (double x : inputs_for(fmt)) {
          Flags f = 0;
          const std::uint64_t dev = device_arith::round_binary64(fmt, x, r, f);
          const auto want =
              oracle::convert(fmt, formats::binary64(), std::bit_cast<std::uint64_t>(x), mode, opt);
          note(n, dev == want.bits && f == want.flags,
               fmt.name + " " + std::string(rounding_name(mode)) + (ftz ? " ftz" : "") + " input " +
                   hex_input(x) + ": MPFR " + std::to_string(want.bits) + " flags " +
                   std::to_string(want.flags) + ", nvcc " + std::to_string(dev) + " flags " +
                   std::to_string(f));
        }
      }
    }
  }
  INFO("first mismatch: " << n.first);
  CHECK(n.values > 2'000'000);
  CHECK(n.mismatches == 0);
  std::cout << "device-arith rounding against MPFR: " << n.values << " values, " << n.mismatches
            << " mismatches" << std::endl;
}

TEST_CASE("device-arith: decoding every encoding and addition equal the CPU core", "[device-arith]") {
  Counts n;
  std::mt19937_64 gen(3);
  for (const char* name : boundary_formats) {
    const Format fmt = parse_format(name);
    const std::uint64_t count = fmt.bits <= 16 ? (std::uint64_t(1) << fmt.bits) : 100000;
    std::vector<std::uint64_t> enc;
    for (std::uint64_t i = 0; i < count; ++i) enc.push_back(fmt.bits <= 16 ? i : gen() & fmt.bit_mask());
    for (std::uint64_t b : enc) {
      Flags f = 0;
      note(n, device_arith::widen_to_binary64(fmt, b) == convert(formats::binary64(), fmt, b, Rounding{}, f),
           fmt.name + " decode " + std::to_string(b));
    }
    for (RoundingMode mode : all_modes)
      for (int t = 0; t < 4000; ++t) {
        const std::uint64_t a = enc[gen() % enc.size()], b = enc[gen() % enc.size()];
        Rounding r;
        r.mode = mode;
        r.random_bits = gen();
        const bool negate = t % 2 == 1;
        Flags cf = 0, df = 0;
        const std::uint64_t cpu = negate ? sub(fmt, a, b, r, cf) : add(fmt, a, b, r, cf);
        const std::uint64_t dev = device_arith::add_signed(fmt, a, b, negate, rounding_desc(r), df);
        note(n, cpu == dev && cf == df, fmt.name + " add " + std::to_string(a) + " " + std::to_string(b));
      }
  }
  INFO("first mismatch: " << n.first);
  CHECK(n.mismatches == 0);
  CHECK(n.values > 500'000);
  std::cout << "device-arith decoding and addition: " << n.values << " cases, " << n.mismatches
            << " mismatches" << std::endl;
}
