// Rounding whole arrays at memory speed. The scalar core (round_double /
// convert) stays the reference: every function here gives the same bits as a
// loop calling it element by element, for every format, rounding mode (the
// stochastic one included), FTZ/DAZ, overflow policy and NaN payload. Flags are
// not reported for arrays.
//
// Fast paths (array_round*.cpp): one bit-manipulation kernel on the binary64
// bits, parameterised by the Format and specialised at compile time for
// binary16 and bfloat16, built for AVX-512, AVX2 and a portable baseline and
// chosen at run time; the rare elements it does not handle (NaN, infinity,
// subnormal inputs, the FTZ tininess boundary) are handed to the scalar core.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

// Instruction sets the kernels are built for; `best` picks the widest this
// CPU supports. A narrower choice exists to test and time each kernel.
enum class ArrayIsa : std::uint8_t { best, portable, avx2, avx512 };

struct ArrayOptions {
  // Mode, FTZ/DAZ, overflow override, NaN policy and stochastic_bits as for the
  // scalar core; random_bits is ignored: element i draws
  // counter_random(seed, stream, first_index + i), so a chunked call with the
  // right first_index gives the same stochastic result as one call, and the
  // thread count never changes a result.
  Rounding rounding;
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t first_index = 0;
  int threads = 0;  // 0: OpenMP's default; 1: the calling thread only
  // Below this many elements the calling thread does all the work (thread
  // start-up costs more than it saves).
  std::size_t parallel_threshold = std::size_t(1) << 16;
  ArrayIsa isa = ArrayIsa::best;  // an ISA the CPU lacks falls back to a narrower one
};

// Encodings of `fmt` for each input value; the output element type must hold
// fmt.bits (std::invalid_argument otherwise, and when the sizes differ).
// Reference: round_double(fmt, in[i], r) for binary64 input,
// convert(fmt, binary32, bits(in[i]), r) for binary32 input.
void round_to_bits(const Format& fmt, std::span<const double> in, std::span<std::uint8_t> out,
                   const ArrayOptions& options = {});
void round_to_bits(const Format& fmt, std::span<const double> in, std::span<std::uint16_t> out,
                   const ArrayOptions& options = {});
void round_to_bits(const Format& fmt, std::span<const double> in, std::span<std::uint32_t> out,
                   const ArrayOptions& options = {});
void round_to_bits(const Format& fmt, std::span<const double> in, std::span<std::uint64_t> out,
                   const ArrayOptions& options = {});
void round_to_bits(const Format& fmt, std::span<const float> in, std::span<std::uint8_t> out,
                   const ArrayOptions& options = {});
void round_to_bits(const Format& fmt, std::span<const float> in, std::span<std::uint16_t> out,
                   const ArrayOptions& options = {});
void round_to_bits(const Format& fmt, std::span<const float> in, std::span<std::uint32_t> out,
                   const ArrayOptions& options = {});
void round_to_bits(const Format& fmt, std::span<const float> in, std::span<std::uint64_t> out,
                   const ArrayOptions& options = {});

// The rounded values themselves, i.e. decode(fmt, round_to_bits(...)): NaNs
// keep their sign and payload as convert() gives them. `in` and `out` may be
// the same array. The binary32 overload needs every value of `fmt` to be a
// binary32 value (std::invalid_argument naming the format otherwise).
void round_values(const Format& fmt, std::span<const double> in, std::span<double> out,
                  const ArrayOptions& options = {});
void round_values(const Format& fmt, std::span<const float> in, std::span<float> out,
                  const ArrayOptions& options = {});

// round_values on binary64 prepared once, for many calls on few values (a
// bias row, one value at a time in a sequential sum): the argument checks, the
// kernel parameters and the choice of kernel happen in the constructor, so a
// call costs what its elements cost. Every call gives the bits round_values
// gives with the same format and options, element i of a call drawing
// stochastic bits at options.first_index + index + i.
//
// One value at a time is inline where the answer needs no kernel: a format
// that holds every binary64 value (the identity), and binary32 by the
// hardware conversion when the constructor found that it rounds exactly as
// the options ask (MXCSR: nearest, no FTZ or DAZ; a thread that changes its
// MXCSR afterwards makes its own ValueRounding).
class ValueRounding {
 public:
  explicit ValueRounding(const Format& fmt, const ArrayOptions& options = {});
  ~ValueRounding();
  ValueRounding(ValueRounding&&) noexcept;
  ValueRounding& operator=(ValueRounding&&) noexcept;

  const Format& format() const;
  const ArrayOptions& options() const;

  double operator()(double x, std::uint64_t index = 0) const {
    if (inline_path_ == InlinePath::identity && std::isfinite(x)) return x;
    if (inline_path_ == InlinePath::binary32 && !std::isnan(x)) return double(float(x));
    return round_one(x, index);
  }
  // `in` and `out` may be the same array.
  void operator()(std::span<const double> in, std::span<double> out, std::uint64_t index = 0) const;

 private:
  double round_one(double x, std::uint64_t index) const;
  struct State;
  std::unique_ptr<State> state_;
  enum class InlinePath : std::uint8_t { none, identity, binary32 };
  InlinePath inline_path_ = InlinePath::none;
};

// Encodings of `fmt` back to binary64 / binary32. Reference:
// convert(binary64 or binary32, fmt, bits[i], round to nearest even), exact for
// every format that fits the output (binary32 output of a wider format throws
// std::invalid_argument naming it). Bits above fmt.bits are ignored.
void decode(const Format& fmt, std::span<const std::uint8_t> bits, std::span<double> out);
void decode(const Format& fmt, std::span<const std::uint16_t> bits, std::span<double> out);
void decode(const Format& fmt, std::span<const std::uint32_t> bits, std::span<double> out);
void decode(const Format& fmt, std::span<const std::uint64_t> bits, std::span<double> out);
void decode(const Format& fmt, std::span<const std::uint8_t> bits, std::span<float> out);
void decode(const Format& fmt, std::span<const std::uint16_t> bits, std::span<float> out);
void decode(const Format& fmt, std::span<const std::uint32_t> bits, std::span<float> out);

// The kernel that `requested` resolves to on this CPU: "avx512", "avx2" or
// "portable" (for benchmark reports and tests).
const char* array_kernel_isa(ArrayIsa requested = ArrayIsa::best);

}  // namespace rpsim
