#include "rpsim/validation/gpu_validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "rpsim/accumulation/tensor_core_operands.hpp"
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
  // Signed zeros: an exact-zero sum with c = -0 or +0, from +0 products,
  // -0 products and two products that cancel. MMA-Sim gives +0 for every
  // exact-zero sum; no real-GPU data in shared/ settled c = -0 (issue #29).
  for (double c : {-0.0, 0.0}) {
    auto a = zeros, b = zeros;
    add_case(set, a, b, c);
    for (std::size_t j = 0; j < k; ++j) a[j] = -0.0;
    add_case(set, a, b, c);
    a = zeros;
    a[0] = 1.0;
    b[0] = 1.0;
    a[k - 1] = -1.0;
    b[k - 1] = 1.0;
    add_case(set, a, b, c);
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

std::string output_folder_name(const Format& output) {
  const auto* c = tensor_core_operand_class(output);
  return c ? std::string(c->short_name) : output.name;
}

std::string golden_folder_name(const Format& input) {
  const auto* c = tensor_core_operand_class(input);
  return c && !c->golden_folder.empty() ? std::string(c->golden_folder) : input.name;
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

namespace {
void write_folder(const std::filesystem::path& folder, const std::vector<GoldenSet>& sets) {
  if (sets.empty()) throw std::invalid_argument("write_golden: no sets");
  const GoldenSet& first = sets.front();
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
    if (s.cases.size() != first.cases.size() || s.input_folder != first.input_folder || s.gpu != first.gpu)
      throw std::invalid_argument("write_golden: sets of one folder must share their GPU and cases");
    std::string d;
    for (const GoldenCase& g : s.cases) d += fmt::format("{:032b}\n", g.d_bits);
    io::write_atomic(folder / fmt::format("d_{}_{}.txt", first.gpu, output_folder_name(s.output)), d);
  }
}
}  // namespace

std::filesystem::path write_golden(const std::filesystem::path& dir, const std::vector<GoldenSet>& sets) {
  if (sets.empty()) throw std::invalid_argument("write_golden: no sets");
  const auto folder = dir / sets.front().gpu / sets.front().input_folder;
  write_folder(folder, sets);
  return folder;
}

void write_golden_gpu(const std::filesystem::path& gpu_dir, const std::vector<GoldenSet>& sets) {
  if (sets.empty()) throw std::invalid_argument("write_golden_gpu: no sets");
  nlohmann::json conventions = {
      {"gpu", sets.front().gpu},
      {"about",
       "Written by rpsim gpu-validate: per set (input format/output format) the instruction that "
       "measured it, whether C was loaded into the accumulator and K per line."},
      {"sets", nlohmann::json::object()}};
  std::map<std::string, std::vector<GoldenSet>> by_folder;
  for (const GoldenSet& s : sets) {
    if (s.instruction.empty()) throw std::invalid_argument("write_golden_gpu: a set without its instruction");
    by_folder[s.input_folder].push_back(s);
    conventions["sets"][s.input_folder + "/" + output_folder_name(s.output)] = {
        {"instruction", s.instruction}, {"c", s.c_loaded ? "loaded" : "zero"}, {"k", s.k}};
  }
  for (const auto& [folder, group] : by_folder) write_folder(gpu_dir / folder, group);
  io::write_atomic(gpu_dir / "conventions.json", conventions.dump(1) + "\n");
}

}  // namespace rpsim::sim
