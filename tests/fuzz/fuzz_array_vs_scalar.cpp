// Differential fuzzer: the array path (array.hpp: round_to_bits, round_values,
// decode; every kernel ISA) against the scalar core it promises to match bit
// for bit (round_double / convert element by element).
//
// Input: byte 0 format, byte 1 rounding mode (stochastic included), byte 2
// options (DAZ, FTZ, overflow override, binary32 input), bytes 3..10 the
// stochastic seed, then the elements (8-byte doubles or 4-byte floats, raw
// bits, so NaN payloads, infinities and subnormals all occur). Each element is
// checked for each of the four ISA choices, and also decoded as an encoding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "formats_under_test.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/rounding.hpp"

namespace {

using rpsim::Format;

const char* const kCustomSpecs[] = {
    "e3m4",    "e6m9",  "e5m3fn", "e3m3fnuz", "e4m5f", "exp=4,man=3,subnormals=no", "exp=5,man=6,bias=9",
    "e8m23fn", "e11m40"};
constexpr rpsim::ArrayIsa kIsas[] = {rpsim::ArrayIsa::portable, rpsim::ArrayIsa::avx2,
                                     rpsim::ArrayIsa::avx512, rpsim::ArrayIsa::best};

const std::vector<const Format*>& formats_under_test() {
  static const std::vector<const Format*> list = rpsim::fuzz::named_and_custom_formats(kCustomSpecs);
  return list;
}

std::uint64_t g_cases = 0;
std::uint64_t g_next_report = 1 << 20;

void report_count() {
  std::fprintf(stderr, "array_vs_scalar: %llu cases checked\n", static_cast<unsigned long long>(g_cases));
}

[[noreturn]] void mismatch(const char* what, const Format& f, const rpsim::ArrayOptions& o, std::size_t i,
                           std::uint64_t input_bits, std::uint64_t got, std::uint64_t want) {
  std::fprintf(stderr,
               "MISMATCH %s format=%s rounding=%d daz=%d ftz=%d overflow=%d isa=%d seed=%llx index=%zu "
               "input=%llx array=%llx scalar=%llx\n",
               what, f.name.c_str(), int(o.rounding.mode), o.rounding.flush_subnormal_inputs,
               o.rounding.flush_subnormal_outputs, o.rounding.overflow ? int(*o.rounding.overflow) : -1,
               int(o.isa), static_cast<unsigned long long>(o.seed), i,
               static_cast<unsigned long long>(input_bits), static_cast<unsigned long long>(got),
               static_cast<unsigned long long>(want));
  report_count();
  std::abort();
}

void count() {
  if (++g_cases >= g_next_report) {
    report_count();
    g_next_report *= 2;
  }
}

template <typename In>
std::uint64_t bits_of(In v) {
  if constexpr (std::is_same_v<In, double>) {
    std::uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  } else {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  }
}

// The scalar reference for element i.
template <typename In>
std::uint64_t scalar(const Format& f, In v, const rpsim::ArrayOptions& o, std::size_t i) {
  rpsim::Rounding r = o.rounding;
  if (r.mode == rpsim::RoundingMode::stochastic)
    r.random_bits = rpsim::counter_random(o.seed, o.stream, o.first_index + i);
  rpsim::Flags fl = 0;
  if constexpr (std::is_same_v<In, double>)
    return rpsim::round_double(f, v, r, fl);
  else
    return rpsim::convert(f, rpsim::formats::binary32(), bits_of(v), r, fl);
}

template <typename In, typename Out>
void check_round(const Format& f, std::span<const In> in, rpsim::ArrayOptions o) {
  std::vector<Out> out(in.size());
  for (rpsim::ArrayIsa isa : kIsas) {
    o.isa = isa;
    rpsim::round_to_bits(f, in, std::span<Out>(out), o);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::uint64_t want = scalar(f, in[i], o, i);
      if (out[i] != want) mismatch("round_to_bits", f, o, i, bits_of(in[i]), out[i], want);
      count();
    }
  }
  if constexpr (std::is_same_v<In, double>) {
    std::vector<double> values(in.size());
    rpsim::round_values(f, in, std::span<double>(values), o);
    for (std::size_t i = 0; i < in.size(); ++i) {
      rpsim::Flags fl = 0;
      const std::uint64_t want =
          rpsim::convert(rpsim::formats::binary64(), f, scalar(f, in[i], o, i), {}, fl);
      if (bits_of(values[i]) != want)
        mismatch("round_values", f, o, i, bits_of(in[i]), bits_of(values[i]), want);
      count();
    }
  }
  // The same bits read as encodings of f.
  std::vector<Out> enc(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) enc[i] = Out(bits_of(in[i]));
  std::vector<double> decoded(in.size());
  rpsim::decode(f, std::span<const Out>(enc), std::span<double>(decoded));
  for (std::size_t i = 0; i < in.size(); ++i) {
    rpsim::Flags fl = 0;
    const std::uint64_t want =
        rpsim::convert(rpsim::formats::binary64(), f, std::uint64_t(enc[i]) & f.bit_mask(), {}, fl);
    if (bits_of(decoded[i]) != want) mismatch("decode", f, o, i, enc[i], bits_of(decoded[i]), want);
    count();
  }
}

template <typename In>
void check_all(const Format& f, std::span<const In> in, const rpsim::ArrayOptions& o) {
  if (f.bits <= 8)
    check_round<In, std::uint8_t>(f, in, o);
  else if (f.bits <= 16)
    check_round<In, std::uint16_t>(f, in, o);
  else if (f.bits <= 32)
    check_round<In, std::uint32_t>(f, in, o);
  else
    check_round<In, std::uint64_t>(f, in, o);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool registered = std::atexit(report_count) == 0;
  (void)registered;
  if (size < 11) return 0;
  const auto& fmts = formats_under_test();
  const Format& f = *fmts[data[0] % fmts.size()];
  rpsim::ArrayOptions o;
  o.threads = 1;
  o.rounding.mode = rpsim::RoundingMode(data[1] % 7);
  o.rounding.flush_subnormal_inputs = data[2] & 1;
  o.rounding.flush_subnormal_outputs = (data[2] >> 1) & 1;
  switch ((data[2] >> 2) & 7) {
    case 1: o.rounding.overflow = rpsim::Overflow::infinity; break;
    case 2: o.rounding.overflow = rpsim::Overflow::nan; break;
    case 3: o.rounding.overflow = rpsim::Overflow::saturate; break;
    default: break;
  }
  o.rounding.stochastic_bits = 1 + (data[1] >> 3) % 32;
  std::memcpy(&o.seed, data + 3, 8);
  o.stream = data[0];
  o.first_index = data[1];
  const bool binary32_input = (data[2] >> 5) & 1;
  const std::uint8_t* elements = data + 11;
  const std::size_t bytes = size - 11;
  if (bytes < (binary32_input ? 4u : 8u)) return 0;
  if (binary32_input) {
    std::vector<float> in(bytes / 4);
    std::memcpy(in.data(), elements, in.size() * 4);
    check_all<float>(f, in, o);
  } else {
    std::vector<double> in(bytes / 8);
    std::memcpy(in.data(), elements, in.size() * 8);
    check_all<double>(f, in, o);
  }
  return 0;
}
