#include "rpsim/validation/gpu_validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/unpacked.hpp"
#include "rpsim/io/results_io.hpp"

namespace rpsim::sim {
namespace {

// A random finite value of `f` as a double: sign, exponent in
// [emin - man_bits, min(emax, 8)] skewed toward the middle, random fraction.
double random_value(const Format& f, std::uint64_t r) {
  const std::uint64_t kind = r % 100;
  r = mix64(r);
  if (kind < 3) return 0.0;
  const bool neg = r & 1;
  r >>= 1;
  std::uint64_t bits;
  if (kind < 13 && f.subnormals) {  // subnormal
    bits = (r % f.man_mask()) + 1;
  } else {
    const int lo = std::max(f.emin, -20), hi = std::min(f.emax, 12);
    const int e = lo + int(r % std::uint64_t(hi - lo + 1));
    r = mix64(r);
    bits = (std::uint64_t(e + f.bias) << f.man_bits) | (r & f.man_mask());
    if (f.nan == NanEncoding::all_ones && e == f.emax) bits &= ~std::uint64_t(1);  // avoid E4M3's NaN
  }
  const double v = to_double(f, bits);
  return neg ? -v : v;
}

std::uint32_t f32_bits(double v) {
  const float f = float(v);  // exact: every value here is a binary32 value
  return std::bit_cast<std::uint32_t>(f);
}

// The smallest power of two representable in `f` that is >= 2^e (clamped).
double pow2_in(const Format& f, int e) {
  const int lo = f.subnormals ? f.emin - f.man_bits : f.emin;
  return std::ldexp(1.0, std::clamp(e, lo, f.emax));
}

void add_case(GoldenSet& set, std::vector<double> a, std::vector<double> b, double c) {
  GoldenCase g;
  g.line = set.cases.size() + 1;
  g.a = std::move(a);
  g.b = std::move(b);
  g.c_bits = f32_bits(c);
  set.cases.push_back(std::move(g));
}

// Detection patterns (Fasi et al. 2021, section 4; Khattak & Mikaitis 2025).
void add_patterns(GoldenSet& set) {
  const Format& in = set.input;
  const std::size_t k = set.k;
  const std::vector<double> zeros(k, 0.0);
  // Alignment: c = 1 and one product 2^-s for s = 20..30 at each position:
  // how many bits below c's leading bit survive, and where a step ends.
  for (int s = 20; s <= 30; ++s) {
    for (std::size_t j = 0; j < k; ++j) {
      auto a = zeros, b = zeros;
      a[j] = pow2_in(in, -(s / 2));
      b[j] = pow2_in(in, -(s - s / 2));
      add_case(set, a, b, 1.0);
      a[j] = -a[j];  // the same below: truncation vs rounding of the negative
      add_case(set, a, b, 1.0);
    }
  }
  // Normalisation: 1 + (1 - 2^-p)-style cancellations across products.
  for (std::size_t j = 1; j < k; ++j) {
    auto a = zeros, b = zeros;
    a[0] = 1.0;
    b[0] = 1.0;
    a[j] = -pow2_in(in, -1);
    b[j] = pow2_in(in, -12);
    add_case(set, a, b, -1.0);
  }
  // Subnormal inputs and products below the smallest normal.
  if (in.subnormals) {
    const double tiny = in.min_positive();
    auto a = zeros, b = zeros;
    for (std::size_t j = 0; j < k; ++j) {
      a[j] = tiny * double(j + 1 <= 3 ? j + 1 : 1);
      b[j] = 1.0;
    }
    add_case(set, a, b, 0.0);
    for (std::size_t j = 0; j < k; ++j) b[j] = tiny;
    add_case(set, a, b, 0.0);
  }
  // Accumulator width (FP8: 13 fraction bits on Ada/H100): c = 1 and a
  // product 2^-s for s around 13..25 in the first position.
  for (int s = 10; s <= 26; ++s) {
    auto a = zeros, b = zeros;
    a[0] = pow2_in(in, -(s / 2));
    b[0] = pow2_in(in, -(s - s / 2));
    add_case(set, a, b, 1.0 + std::ldexp(1.0, -s - 1));
  }
}

}  // namespace

std::string golden_folder_name(const Format& input) {
  if (input.name == "binary16") return "fp16";
  if (input.name == "bfloat16") return "bf16";
  if (input.name == "tf32") return "tf32";
  if (input.name == "e4m3") return "E4M3";
  if (input.name == "e5m2") return "E5M2";
  return input.name;
}

GoldenSet generate_mma_cases(const std::string& gpu, const Format& input, const Format& output, std::size_t k,
                             std::size_t random_cases, std::uint64_t seed) {
  GoldenSet set;
  set.gpu = gpu;
  set.input_folder = golden_folder_name(input);
  set.input = input;
  set.output = output;
  set.k = k;
  add_patterns(set);
  for (std::size_t i = 0; i < random_cases; ++i) {
    std::vector<double> a(k), b(k);
    for (std::size_t j = 0; j < k; ++j) {
      a[j] = random_value(input, counter_random(seed, 1, i * k + j));
      b[j] = random_value(input, counter_random(seed, 2, i * k + j));
    }
    // C is a binary32 value; for binary16 output the GPU rounds it (golden_c).
    double c = random_value(formats::binary32(), counter_random(seed, 3, i));
    if (i % 7 == 0)
      c = -[&] {
        double s = 0;
        for (std::size_t j = 0; j < k; ++j) s += a[j] * b[j];
        return double(float(s));
      }();
    add_case(set, std::move(a), std::move(b), c);
  }
  return set;
}

std::filesystem::path write_golden(const std::filesystem::path& dir, const std::vector<GoldenSet>& sets) {
  if (sets.empty()) throw std::invalid_argument("write_golden: no sets");
  const GoldenSet& first = sets.front();
  const auto folder = dir / first.gpu / first.input_folder;
  io::ensure_writable_dir(folder);
  std::string a, b, c;
  for (const GoldenCase& g : first.cases) {
    for (std::size_t j = 0; j < g.a.size(); ++j) a += fmt::format("{}{:08x}", j ? " " : "", f32_bits(g.a[j]));
    for (std::size_t j = 0; j < g.b.size(); ++j) b += fmt::format("{}{:08x}", j ? " " : "", f32_bits(g.b[j]));
    a += '\n';
    b += '\n';
    c += fmt::format("{:032b}\n", g.c_bits);
  }
  const std::string tag = first.gpu + "_" + first.input_folder;
  io::write_atomic(folder / ("a_" + tag + ".txt"), a);
  io::write_atomic(folder / ("b_" + tag + ".txt"), b);
  io::write_atomic(folder / ("c_" + first.gpu + "_fp32.txt"), c);
  for (const GoldenSet& s : sets) {
    if (s.cases.size() != first.cases.size() || s.input_folder != first.input_folder)
      throw std::invalid_argument("write_golden: sets of one folder must share their cases");
    std::string d;
    for (const GoldenCase& g : s.cases) d += fmt::format("{:032b}\n", g.d_bits);
    const char* out = s.output.name == "binary16" ? "fp16" : "fp32";
    io::write_atomic(folder / fmt::format("d_{}_{}.txt", first.gpu, out), d);
  }
  return folder;
}

std::string preset_for_device(const std::string& name, int major, int minor) {
  std::string n;
  for (char ch : name) n += char(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* p : {"h200", "h100", "b200", "l40s", "a100", "a30", "a2", "v100", "t4"})
    if (n.find(p) != std::string::npos) return p;
  const int cc = major * 10 + minor;
  if (cc == 70) return "v100";
  if (cc == 75) return "t4";
  if (cc == 80) return "a100";
  if (cc == 89) return "ada";
  if (cc == 90) return "h100";
  if (cc == 100) return "b200";
  return "";
}

std::uint64_t emulate_conversion(const ConversionSpec& spec, std::uint64_t in_bits) {
  Rounding r;
  r.mode = spec.rounding;
  if (spec.saturate) r.overflow = Overflow::saturate;
  Flags ignored = 0;
  return convert(spec.to, spec.from, in_bits, r, ignored);
}

void check_conversion(const ConversionSpec& spec, const std::vector<std::uint32_t>& in,
                      const std::vector<std::uint32_t>& got, BitCheck& check, std::size_t show) {
  if (in.size() != got.size()) throw std::invalid_argument("check_conversion: size mismatch");
  check.name = spec.name;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint64_t want = emulate_conversion(spec, in[i]);
    bool ok = want == got[i];
    if (!ok && is_nan(spec.to, want) && is_nan(spec.to, got[i])) ok = true;
    ++check.total;
    if (ok) {
      ++check.passed;
    } else if (check.first_mismatches.size() < show) {
      check.first_mismatches.push_back(fmt::format(
          "index {}: input 0x{:0{}X} expected 0x{:0{}X} got 0x{:0{}X}", i, in[i], (spec.from.bits + 3) / 4,
          want, (spec.to.bits + 3) / 4, got[i], (spec.to.bits + 3) / 4));
    }
  }
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
