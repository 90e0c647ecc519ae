// The conversion side of gpu-validate: what a CUDA conversion intrinsic
// returns as rpsim predicts it (CUDA's own saturation and NaN rules on top of
// the formats core's convert), checked one input at a time or, for binary32
// inputs, over whole ranges through the formats library's array path on all
// cores (the exhaustive check of all 2^32 inputs).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

#include "rpsim/formats/array.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/unpacked.hpp"
#include "rpsim/validation/gpu_validation.hpp"

namespace rpsim::sim {

std::uint64_t emulate_conversion(const ConversionSpec& spec, std::uint64_t in_bits) {
  if (spec.nan_result >= 0 && is_nan(spec.from, in_bits)) return std::uint64_t(spec.nan_result);
  Rounding r;
  r.mode = spec.rounding;
  if (spec.saturate) {
    r.overflow = Overflow::saturate;
    // __NV_SATFINITE saturates infinities too (cuda_fp8.h: "input larger than
    // the maximum representable finite number MAXNORM of the target format
    // round to the MAXNORM of the same sign"; its host reference maps |x| =
    // inf there; an H100 with CUDA 13.0 gives 0x7B/0xFB for E5M2 from
    // +-inf). rpsim's Overflow::saturate converts an infinity exactly where
    // the format has one, as IEEE does, so the intrinsic's rule is applied
    // here. NaN stays NaN.
    const Unpacked u = unpack(spec.from, in_bits);
    if (u.cls == Class::infinity && spec.to.has_inf()) return spec.to.max_finite_bits(u.sign);
  }
  Flags ignored = 0;
  return convert(spec.to, spec.from, in_bits, r, ignored);
}

namespace {
bool same_result(const Format& to, std::uint64_t want, std::uint64_t got) {
  return want == got || (is_nan(to, want) && is_nan(to, got));
}

std::string mismatch_line(const ConversionSpec& spec, std::size_t index, std::uint64_t in, std::uint64_t want,
                          std::uint64_t got) {
  return fmt::format("index {}: input 0x{:0{}X} expected 0x{:0{}X} got 0x{:0{}X}", index, in,
                     (spec.from.bits + 3) / 4, want, (spec.to.bits + 3) / 4, got, (spec.to.bits + 3) / 4);
}

// The array path's prediction for the binary32 inputs first .. first+n-1,
// in elements of the target's width (binary16 then takes the F16C path).
template <class Out>
void emulate_block(const ConversionSpec& spec, std::uint32_t first, std::span<float> in,
                   std::span<Out> want) {
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::bit_cast<float>(std::uint32_t(first + i));
  ArrayOptions o;
  o.rounding.mode = spec.rounding;
  if (spec.saturate) o.rounding.overflow = Overflow::saturate;
  o.threads = 1;  // the caller's threads each take a block
  round_to_bits(spec.to, std::span<const float>(in), want, o);
  if (spec.nan_result >= 0)  // emulate_conversion's NaN rule
    for (std::size_t i = 0; i < in.size(); ++i)
      if (std::isnan(in[i])) want[i] = Out(spec.nan_result);
  if (!spec.saturate || !spec.to.has_inf()) return;
  for (const std::uint32_t inf : {0x7F800000u, 0xFF800000u})  // emulate_conversion's infinity rule
    if (inf - first < in.size()) want[inf - first] = Out(spec.to.max_finite_bits(inf >> 31));
}
}  // namespace

void check_conversion(const ConversionSpec& spec, const std::vector<std::uint32_t>& in,
                      const std::vector<std::uint32_t>& got, BitCheck& check, std::size_t show) {
  if (in.size() != got.size()) throw std::invalid_argument("check_conversion: size mismatch");
  check.name = spec.name;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint64_t want = emulate_conversion(spec, in[i]);
    ++check.total;
    if (same_result(spec.to, want, got[i]))
      ++check.passed;
    else if (check.first_mismatches.size() < show)
      check.first_mismatches.push_back(mismatch_line(spec, i, in[i], want, got[i]));
  }
}

namespace {
constexpr std::size_t kBlock = std::size_t(1) << 14;  // a thread's block stays in its L2

void check_range_arguments(const char* what, const ConversionSpec& spec, std::uint32_t first, std::size_t n) {
  if (spec.from != formats::binary32())
    throw std::invalid_argument(
        fmt::format("{}: {} reads {}, not binary32", what, spec.name, spec.from.name));
  if (n > (std::uint64_t(1) << 32) - first)
    throw std::invalid_argument(fmt::format("{}: the range passes 2^32", what));
}

// Runs `body(Out{})` with Out the narrowest unsigned type holding the target.
template <class Body>
void with_width(const Format& to, Body body) {
  if (to.bits <= 8)
    body(std::uint8_t{});
  else if (to.bits <= 16)
    body(std::uint16_t{});
  else
    body(std::uint32_t{});
}

struct RangeCounts {
  std::size_t passed = 0;
  std::vector<std::pair<std::size_t, std::string>> shown;  // (offset, line)
};

template <class Out>
RangeCounts check_blocks(const ConversionSpec& spec, std::uint32_t first, std::span<const std::uint32_t> got,
                         std::size_t show) {
  const std::size_t blocks = (got.size() + kBlock - 1) / kBlock;
  RangeCounts counts;
  std::size_t passed = 0;
#pragma omp parallel reduction(+ : passed)
  {
    std::vector<float> in(kBlock);
    std::vector<Out> want(kBlock);
    std::vector<std::pair<std::size_t, std::string>> mine;
#pragma omp for schedule(static)
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t lo = b * kBlock, n = std::min(kBlock, got.size() - lo);
      emulate_block(spec, std::uint32_t(first + lo), std::span(in).first(n), std::span(want).first(n));
      for (std::size_t i = 0; i < n; ++i) {
        if (same_result(spec.to, want[i], got[lo + i]))
          ++passed;
        else if (mine.size() < show)
          mine.emplace_back(lo + i,
                            mismatch_line(spec, first + lo + i, first + lo + i, want[i], got[lo + i]));
      }
    }
#pragma omp critical
    counts.shown.insert(counts.shown.end(), mine.begin(), mine.end());
  }
  counts.passed = passed;
  std::sort(counts.shown.begin(), counts.shown.end());
  return counts;
}
}  // namespace

void emulate_conversion_range(const ConversionSpec& spec, std::uint32_t first, std::span<std::uint32_t> out) {
  check_range_arguments("emulate_conversion_range", spec, first, out.size());
  const std::size_t blocks = (out.size() + kBlock - 1) / kBlock;
  with_width(spec.to, [&](auto zero) {
#pragma omp parallel
    {
      std::vector<float> in(kBlock);
      std::vector<decltype(zero)> want(kBlock);
#pragma omp for schedule(static)
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t lo = b * kBlock, n = std::min(kBlock, out.size() - lo);
        emulate_block(spec, std::uint32_t(first + lo), std::span(in).first(n), std::span(want).first(n));
        std::copy(want.begin(), want.begin() + std::ptrdiff_t(n), out.begin() + std::ptrdiff_t(lo));
      }
    }
  });
}

void check_conversion_range(const ConversionSpec& spec, std::uint32_t first,
                            std::span<const std::uint32_t> got, BitCheck& check, std::size_t show) {
  check_range_arguments("check_conversion_range", spec, first, got.size());
  RangeCounts counts;
  with_width(spec.to, [&](auto zero) { counts = check_blocks<decltype(zero)>(spec, first, got, show); });
  check.name = spec.name;
  check.total += got.size();
  check.passed += counts.passed;
  for (std::size_t i = 0; i < counts.shown.size() && check.first_mismatches.size() < show; ++i)
    check.first_mismatches.push_back(counts.shown[i].second);
}

std::vector<ConversionSpec> float_conversion_specs() {
  std::vector<ConversionSpec> specs;
  const std::pair<RoundingMode, const char*> modes[] = {{RoundingMode::nearest_even, "rn"},
                                                        {RoundingMode::toward_zero, "rz"},
                                                        {RoundingMode::down, "rd"},
                                                        {RoundingMode::up, "ru"}};
  for (auto [to, intrinsic] :
       {std::pair{&formats::binary16(), "__float2half"}, {&formats::bfloat16(), "__float2bfloat16"}})
    for (auto [mode, suffix] : modes)
      specs.push_back({fmt::format("{}_{}", intrinsic, suffix), formats::binary32(), *to, mode, false});
  for (auto [to, kind] : {std::pair{&formats::e4m3(), "E4M3"}, {&formats::e5m2(), "E5M2"}})
    for (bool sat : {true, false})
      specs.push_back({fmt::format("__nv_cvt_float_to_fp8({},{})", kind, sat ? "SATFINITE" : "NOSAT"),
                       formats::binary32(), *to, RoundingMode::nearest_even, sat});
  return specs;
}

std::vector<std::uint32_t> conversion_inputs(const ConversionSpec& spec, std::size_t random,
                                             std::uint64_t seed) {
  std::vector<std::uint32_t> v;
  const Format& from = spec.from;
  const std::uint64_t n_from = from.bits >= 32 ? 0 : (std::uint64_t(1) << from.bits);
  if (n_from) {
    for (std::uint64_t x = 0; x < n_from; ++x) v.push_back(std::uint32_t(x));  // every encoding
    return v;
  }
  // Wide source (binary32): specials, the target's rounding boundaries, random.
  for (std::uint32_t s : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u,
                          0x7F800001u, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu})
    v.push_back(s);
  const Format& to = spec.to;
  const std::uint64_t n_to = std::uint64_t(1) << std::min(to.bits, 16);
  for (std::uint64_t t = 0; t + 1 < n_to; ++t) {
    const double lo = to_double(to, t), hi = to_double(to, t + 1);
    if (!std::isfinite(lo) || !std::isfinite(hi) || std::signbit(lo) != std::signbit(hi)) continue;
    const float mid = float((lo + hi) / 2);  // exact midpoint when binary32 holds it
    const std::uint32_t m = std::bit_cast<std::uint32_t>(mid);
    v.insert(v.end(), {m - 1, m, m + 1});
  }
  for (std::size_t i = 0; i < random; ++i) v.push_back(std::uint32_t(counter_random(seed, 7, i)));
  return v;
}

}  // namespace rpsim::sim
