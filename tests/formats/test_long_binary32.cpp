// binary32 encodings through rpsim's scalar convert to binary16 and bfloat16,
// in RNE and RTZ, against x86 hardware: F16C VCVTPS2PH with its rounding
// immediate for binary16, AVX512-BF16 VCVTNEPS2BF16 for bfloat16 RNE (when
// the CPU has it), and truncation of the top 16 bits for bfloat16 RTZ.
//
// Which ones: every encoding whose binary32 exponent is one where either
// conversion can behave differently from its neighbours' -- binary32's
// subnormals and smallest normals, binary16's whole range with a margin on
// both sides (2^-26 .. 2^19: its subnormals, the rounding to zero and the
// overflow), the exponents around 1, and the top ones (bfloat16's overflow,
// infinities and NaNs) -- and, for every other exponent, each encoding whose
// top 7 fraction bits are 0000000, 0000001, 1111110 or 1111111 (all 2^16 low
// bits each: the roundings, ties and carries into the exponent). Outside that
// set binary16 conversion is a flush to zero or an overflow, the same at
// every exponent, and bfloat16's depends on the low 16 bits and the carry
// only. 1.0e9 of the 4.29e9 encodings (23%): a quarter of the time. With
// RPSIM_EXHAUSTIVE=1 all 2^32 are checked (about 13 CPU minutes).
#include <immintrin.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cpu_features.hpp"
#include "rpsim/formats/ops.hpp"
#include "shared_data.hpp"

using namespace rpsim;

namespace {

constexpr int kChunkBits = 16;
constexpr std::size_t kChunk = std::size_t(1) << kChunkBits;

// Both binary16 roundings of 8 floats per instruction; imm8 bits 1:0 select
// the rounding (0 nearest even, 3 toward zero) and bit 2 clear ignores MXCSR.
__attribute__((target("avx,f16c"))) void f16c_convert(const std::uint32_t* in, std::uint16_t* rne,
                                                      std::uint16_t* rtz, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(rne + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(rtz + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_ZERO));
  }
}

// VCVTNEPS2BF16 rounds to nearest even, quiets NaNs keeping the top payload
// bits, and reads binary32 subnormal inputs as zero (Intel SDM, "VCVTNEPS2BF16").
__attribute__((target("avx512f,avx512bf16"))) void avx512_bf16_convert(const std::uint32_t* in,
                                                                       std::uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_castsi512_ps(_mm512_loadu_si512(in + i));
    const __m256bh h = _mm512_cvtneps_pbh(v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<const __m256i&>(h));
  }
}

bool is_nan32(std::uint32_t x) {
  return (x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu) != 0;
}
bool is_subnormal32(std::uint32_t x) {
  return (x & 0x7F800000u) == 0 && (x & 0x7FFFFFu) != 0;
}

// bfloat16 as the top half of binary32: a NaN keeps its top payload bits and
// gets the quiet bit (as hardware does); otherwise truncate, or add half a
// unit and the parity bit first (round to nearest even, carries included).
std::uint16_t bf16_truncate(std::uint32_t x) {
  return is_nan32(x) ? std::uint16_t((x >> 16) | 0x40) : std::uint16_t(x >> 16);
}
std::uint16_t bf16_nearest_even(std::uint32_t x) {
  if (is_nan32(x)) return std::uint16_t((x >> 16) | 0x40);
  return std::uint16_t((std::uint64_t(x) + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

// Whether the chunk of 2^16 encodings sharing the top 16 bits (sign, the 8
// exponent bits, the top 7 fraction bits) is in the set above.
bool chunk_checked(std::uint32_t top16, bool exhaustive) {
  if (exhaustive) return true;
  const std::uint32_t exp = (top16 >> 7) & 0xFF, frac7 = top16 & 0x7F;
  if (exp <= 2 || exp >= 252) return true;    // subnormals; bfloat16's overflow, inf, NaN
  if (exp >= 101 && exp <= 146) return true;  // binary16's range, 2^-26 .. 2^19
  if (exp >= 125 && exp <= 129) return true;  // around 1
  return frac7 <= 1 || frac7 >= 0x7E;
}

struct Failures {
  std::uint64_t count = 0;
  std::vector<std::string> first;
};

}  // namespace

TEST_CASE(
    "binary32 converts to binary16 and bfloat16 as x86 hardware does (every exponent where conversion can "
    "differ)",
    "[long][convert]") {
  if (!rpsim::test::cpu_has_f16c()) {
    RPSIM_SKIP("skipped: this CPU has no F16C");
  }
  const bool has_bf16 = __builtin_cpu_supports("avx512bf16");
  if (!has_bf16) WARN("no AVX512-BF16: bfloat16 RNE is checked against the integer rounding only");

  const Format& f32 = formats::binary32();
  const Format& f16 = formats::binary16();
  const Format& bf16 = formats::bfloat16();
  const char* env = std::getenv("RPSIM_EXHAUSTIVE");
  const bool exhaustive = env && std::string(env) == "1";
  std::uint64_t failed = 0, checked = 0, expected = 0;
  for (std::uint32_t c = 0; c < (1u << (32 - kChunkBits)); ++c)
    expected += chunk_checked(c, exhaustive) ? kChunk : 0;
  std::vector<std::string> notes;

#pragma omp parallel reduction(+ : failed, checked)
  {
    // Buffers per thread, reused for every chunk.
    std::vector<std::uint32_t> in(kChunk);
    std::vector<std::uint16_t> hw_rne(kChunk), hw_rtz(kChunk), hw_bf16(kChunk);
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t chunk = 0; chunk < (std::int64_t(1) << (32 - kChunkBits)); ++chunk) {
      if (!chunk_checked(std::uint32_t(chunk), exhaustive)) continue;
      for (std::size_t i = 0; i < kChunk; ++i) in[i] = std::uint32_t(std::uint64_t(chunk) << kChunkBits | i);
      f16c_convert(in.data(), hw_rne.data(), hw_rtz.data(), kChunk);
      if (has_bf16) avx512_bf16_convert(in.data(), hw_bf16.data(), kChunk);

      Rounding rne, rtz, rne_daz;
      rtz.mode = RoundingMode::toward_zero;
      rne_daz.flush_subnormal_inputs = true;
      auto expect = [&](const char* what, std::uint32_t x, std::uint64_t got, std::uint64_t want) {
        ++checked;
        if (got == want) return;
        ++failed;
#pragma omp critical
        if (notes.size() < 12) {
          std::ostringstream s;
          s << what << " of binary32 0x" << std::hex << x << ": rpsim 0x" << got << ", hardware 0x" << want;
          notes.push_back(s.str());
        }
      };
      for (std::size_t i = 0; i < kChunk; ++i) {
        const std::uint32_t x = in[i];
        Flags fl = 0;
        expect("binary16 rne", x, convert(f16, f32, x, rne, fl), hw_rne[i]);
        expect("binary16 rtz", x, convert(f16, f32, x, rtz, fl), hw_rtz[i]);
        const std::uint64_t b_rne = convert(bf16, f32, x, rne, fl);
        expect("bfloat16 rne (integer rounding)", x, b_rne, bf16_nearest_even(x));
        if (has_bf16) {
          if (is_subnormal32(x))  // the instruction reads subnormals as zero: so must rpsim with DAZ
            expect("bfloat16 rne daz", x, convert(bf16, f32, x, rne_daz, fl), hw_bf16[i]);
          else
            expect("bfloat16 rne", x, b_rne, hw_bf16[i]);
        }
        expect("bfloat16 rtz", x, convert(bf16, f32, x, rtz, fl), bf16_truncate(x));
      }
    }
  }
  std::string text;
  for (const auto& n : notes) text += "\n  " + n;
  INFO(failed << " of " << checked << " conversions differ:" << text);
  INFO(expected << " encodings in the checked set" << (exhaustive ? " (all of them)" : ""));
  CHECK(expected >= (exhaustive ? std::uint64_t(1) << 32 : std::uint64_t(1) << 29));
  CHECK(checked >= 4 * expected);
  CHECK(failed == 0);
}
