// device-arith: the recipes' scale rules and element encodings
// (recipe_arith_scales.hpp) as nvcc compiles them (device_arith.cu, the code a
// CUDA block quantiser runs) against the CPU core's copy of the same source,
// the one `rpsim recipe-check` holds to TE's and torchao's reference files:
// the E8M0 casts and every MX scale rule for every element format, NVFP4's
// tensor and block scales under both TE formulas, 4over6, TE's FP8 current
// and block scaling, every element encoding and decoding -- on a stride
// through all 2^32 binary32 inputs, every power of two and its neighbours,
// zeros, subnormals, infinities and NaN. Codes compared bit for bit, binary32
// results too except a NaN's payload (same() below).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "device_arith.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/recipe_arith_scales.hpp"
#include "rpsim/formats/recipe_block.hpp"

using namespace rpsim;
namespace host = rpsim::recipe::host;
using recipe::ElementKind;

namespace {

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

// binary32 inputs: every 65521st encoding (a prime stride: all exponents,
// both signs, scattered fractions), each power of two with the encodings one
// and two below and above it, the specials.
std::vector<float> inputs() {
  std::vector<float> in;
  for (std::uint64_t b = 0; b < (std::uint64_t(1) << 32); b += 65521)
    in.push_back(std::bit_cast<float>(std::uint32_t(b)));
  for (std::uint32_t e = 0; e < 256; ++e)
    for (std::uint32_t sign : {0u, 0x80000000u}) {
      const std::uint32_t p = sign | (e << 23);
      for (std::int32_t d = -2; d <= 2; ++d)
        in.push_back(std::bit_cast<float>(std::uint32_t(std::int64_t(p) + d)));
    }
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            6.0f,
                            448.0f,
                            2688.0f,
                            57344.0f,
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::bit_cast<float>(0xffc00001u),
                            std::bit_cast<float>(0x7f800001u)};
  for (float s : specials) in.push_back(s);
  return in;
}

struct Count {
  std::uint64_t n = 0, bad = 0;
  std::string first;
  void operator()(bool ok, const std::string& what) {
    ++n;
    if (!ok && bad++ == 0) first = what;
  }
};

// Equal bits, or both NaN: a NaN's payload and sign out of an arithmetic
// operation are the compiler's choice of operand order on the host (SSE
// returns the first NaN operand's payload) and canonical on a GPU (0x7fffffff),
// and no recipe reads them. Codes are compared bit for bit.
bool same(float a, float b) {
  return bits(a) == bits(b) || (a != a && b != b);
}

std::string hex(float x) {
  std::ostringstream s;
  s << "0x" << std::hex << bits(x);
  return s.str();
}

const ElementKind kinds[] = {ElementKind::e4m3, ElementKind::e5m2, ElementKind::e3m2,
                             ElementKind::e2m3, ElementKind::e2m1, ElementKind::int8};
const recipe::MxScaleRule rules[] = {recipe::MxScaleRule::floor, recipe::MxScaleRule::ceil,
                                     recipe::MxScaleRule::even, recipe::MxScaleRule::rceil};

// Each case: nvcc's copy against the host's on the inputs, every mismatch
// counted, the first named.
void report(const Count& c) {
  INFO(c.bad << " of " << c.n << " differ; first: " << c.first);
  CHECK(c.n > 1000);
  CHECK(c.bad == 0);
}

// Operands of ordinary values with the specials of inputs() scattered in
// (NaN replaced by 0 unless `nan`).
std::vector<float> block_operand(const std::vector<float>& in, std::uint64_t& state, std::size_t n,
                                 bool nan) {
  std::vector<float> x(n);
  for (auto& v : x) {
    const std::uint64_t r = state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = (r >> 60) == 0
            ? in[(r >> 20) % in.size()]
            : std::ldexp(float(std::int64_t(r >> 40) - (1 << 23)) / float(1 << 23), int(r % 40) - 20);
    if (!nan && v != v) v = 0.0f;
  }
  return x;
}

// Every MX rule and element format, FP8 block with and without pow2 scales,
// NVFP4 under both formulas.
std::vector<QuantSpec> block_specs() {
  std::vector<QuantSpec> specs;
  for (auto k : kinds)
    for (auto r : rules) {
      QuantSpec s;
      s.family = ScaleFamily::mx;
      s.element = k;
      s.scale_rule = r;
      specs.push_back(s);
    }
  for (auto k : {ElementKind::e4m3, ElementKind::e5m2})
    for (bool pow2 : {false, true}) {
      QuantSpec s;
      s.family = ScaleFamily::fp8;
      s.element = k;
      s.pow2_scales = pow2;
      specs.push_back(s);
    }
  for (auto f : {recipe::Nvfp4Formula::te_2026_03, recipe::Nvfp4Formula::te_2026_02}) {
    QuantSpec s;
    s.family = ScaleFamily::nvfp4;
    s.element = ElementKind::e2m1;
    s.formula = f;
    specs.push_back(s);
  }
  return specs;
}

// The host compiler's copy of device_arith::quantize_operand.
void host_operand(const QuantSpec& spec, const recipe::OperandGroups& g, const recipe::Nvfp4TensorScale& ts,
                  const recipe::StochasticElements* sr, const std::vector<float>& x,
                  std::vector<std::uint8_t>& codes, std::vector<recipe::BlockScale>& scales) {
  for (std::size_t gi = 0; gi < host::group_rows(g); ++gi)
    for (std::size_t gj = 0; gj < host::group_cols(g); ++gj)
      for (std::size_t j = 0; j < host::group_blocks(g); ++j)
        host::quantize_group_block(
            spec, g, gi, gj, j, ts, sr, [&](std::size_t i, std::size_t k) { return x[i * g.cols + k]; },
            [&](std::size_t i, std::size_t k, std::uint8_t code, const recipe::BlockScale& b) {
              codes[i * g.cols + k] = code;
              scales[i * g.cols + k] = b;
            });
}

}  // namespace

TEST_CASE(
    "device-arith: recipes: E8M0 casts and MX scale codes, every rule and element format equal the CPU "
    "core's",
    "[device-arith]") {
  REQUIRE(std::string(device_arith::compiled_by()) == "nvcc");
  const std::vector<float> in = inputs();
  Count c;
  for (float x : in) {
    for (auto cast : {recipe::E8m0Cast::floor, recipe::E8m0Cast::ceil, recipe::E8m0Cast::rceil})
      c(device_arith::e8m0_from_f32(x, cast) == host::e8m0_from_f32(x, cast), "e8m0 cast of " + hex(x));
    for (auto k : kinds)
      for (auto r : rules)
        c(device_arith::mx_scale_code(x, r, k) == host::mx_scale_code(x, r, host::element_info(k)),
          "mx scale of amax " + hex(x));
  }
  report(c);
}

TEST_CASE(
    "device-arith: recipes: MX elements under every scale code and rule, every element format equal the CPU "
    "core's",
    "[device-arith]") {
  REQUIRE(std::string(device_arith::compiled_by()) == "nvcc");
  const std::vector<float> in = inputs();
  Count c;
  for (std::size_t i = 0; i < in.size(); i += 7)
    for (int code = 0; code < 256; code += 3)
      for (auto k : kinds)
        for (auto r : rules)
          c(device_arith::mx_element(in[i], std::uint8_t(code), r, k) ==
                host::mx_element(in[i], std::uint8_t(code), r, k),
            "mx element " + hex(in[i]) + " scale code " + std::to_string(code));
  report(c);
}

TEST_CASE(
    "device-arith: recipes: NVFP4: tensor scales, block scales under both formulas, encode scales, elements, "
    "4over6 equal the CPU core's",
    "[device-arith]") {
  REQUIRE(std::string(device_arith::compiled_by()) == "nvcc");
  const std::vector<float> in = inputs();
  Count c;
  for (float amax : in)
    for (float emax : {448.0f, 256.0f}) {
      const auto d = device_arith::nvfp4_tensor_scale(amax, emax);
      const auto h = host::nvfp4_tensor_scale(amax, emax);
      c(same(d.encode, h.encode) && same(d.decode, h.decode), "tensor scale of " + hex(amax));
    }
  const float ges[] = {1.0f,
                       2688.0f,
                       3.4e38f,
                       1.7e-5f,
                       std::numeric_limits<float>::max(),
                       std::numeric_limits<float>::quiet_NaN()};
  for (float v : in)
    for (float g : ges) {
      for (auto f : {recipe::Nvfp4Formula::te_2026_03, recipe::Nvfp4Formula::te_2026_02})
        c(same(device_arith::nvfp4_scale_argument(v, g, f), host::nvfp4_scale_argument(v, g, f)),
          "block scale argument " + hex(v));
      c(same(device_arith::nvfp4_encode_scale(v, g), host::nvfp4_encode_scale(v, g)),
        "encode scale " + hex(v));
      c(device_arith::nvfp4_element(v, g) == host::nvfp4_element(v, g), "element " + hex(v));
      for (bool map4 : {false, true})
        c(device_arith::nvfp4_4over6_scale(v, g, map4) == host::nvfp4_4over6_scale(v, g, map4),
          "4over6 scale " + hex(v));
    }
  for (std::size_t i = 0; i < in.size(); i += 13)
    for (int code = 0; code < 256; code += 5)
      for (bool fast : {false, true})
        for (bool mse : {false, true}) {
          const float q = in[(i * 7 + std::size_t(code)) % in.size()];
          c(same(device_arith::nvfp4_4over6_term(q, std::uint8_t(code), 3.0f, 448.0f, in[i], 2688.0f, fast,
                                                 mse),
                 host::nvfp4_4over6_term(q, std::uint8_t(code), 3.0f, 448.0f, in[i], 2688.0f, fast, mse)),
            "4over6 term " + hex(in[i]));
        }
  report(c);
}

TEST_CASE("device-arith: recipes: FP8 current and block scaling: scales and elements equal the CPU core's",
          "[device-arith]") {
  REQUIRE(std::string(device_arith::compiled_by()) == "nvcc");
  const std::vector<float> in = inputs();
  Count c;
  for (float amax : in)
    for (float max : {448.0f, 57344.0f})
      for (bool pow2 : {false, true}) {
        const auto d = device_arith::te_fp8_scale(amax, max, pow2);
        const auto h = host::te_fp8_scale(amax, max, pow2);
        c(same(d.scale, h.scale) && same(d.scale_inv, h.scale_inv), "fp8 scale of " + hex(amax));
      }
  const float scales[] = {1.0f, 0.5f, 1024.0f, 3.0e-30f, 7.0e30f, std::numeric_limits<float>::max(), 0.0f};
  for (float x : in)
    for (float s : scales)
      for (auto k : {ElementKind::e4m3, ElementKind::e5m2})
        for (bool clamp : {false, true})
          c(device_arith::fp8_element(x, s, k, clamp) == host::fp8_element(x, s, k, clamp),
            "fp8 element " + hex(x));
  report(c);
}

TEST_CASE(
    "device-arith: recipes: every element code of every element format decodes alike equal the CPU core's",
    "[device-arith]") {
  REQUIRE(std::string(device_arith::compiled_by()) == "nvcc");
  const std::vector<float> in = inputs();
  Count c;
  for (auto k : kinds)
    for (int code = 0; code < 256; ++code)
      c(same(device_arith::element_value(k, std::uint8_t(code)), host::element_value(k, std::uint8_t(code))),
        "decode of code " + std::to_string(code));
  report(c);
}

TEST_CASE(
    "device-arith: recipes: a GEMM operand's block quantisation (recipe_block.hpp: groups, lines and tiles, "
    "stochastic keys) equals the CPU core's, every family, rule and element format",
    "[device-arith]") {
  REQUIRE(std::string(device_arith::compiled_by()) == "nvcc");
  const std::vector<float> in = inputs();
  std::uint64_t state = 7;
  const std::vector<QuantSpec> specs = block_specs();
  Count c;
  for (const QuantSpec& spec : specs)
    for (std::size_t block : {16u, 32u})
      for (bool tiles : {false, true})
        for (bool nan : {false, true}) {
          recipe::OperandGroups g;
          g.rows = 37;
          g.cols = 45;
          g.block = block;
          g.tiles = tiles;
          const std::vector<float> x = block_operand(in, state, g.rows * g.cols, nan);
          float amax = 0;
          for (float v : x) amax = host::nan_max(amax, host::abs_f32(v));
          const recipe::Nvfp4TensorScale ts = host::nvfp4_tensor_scale(amax, 448.0f);
          for (bool stochastic : {false, true}) {
            if (stochastic && spec.element == ElementKind::int8) continue;  // (nearest only)
            recipe::StochasticElements sr;
            sr.seed = state = state * 6364136223846793005ull + 1442695040888963407ull;
            sr.stream = state ^ 0x9e3779b97f4a7c15ull;
            if (stochastic) sr.element = rpsim::format(element_name(spec.element));
            Rounding r;
            r.mode = RoundingMode::stochastic;
            sr.rounding = rounding_desc(r);
            const recipe::StochasticElements* key = stochastic ? &sr : nullptr;
            std::vector<std::uint8_t> dc(x.size()), hc(x.size());
            std::vector<recipe::BlockScale> ds(x.size()), hs(x.size());
            device_arith::quantize_operand(spec, g, ts, key, x.data(), dc.data(), ds.data());
            host_operand(spec, g, ts, key, x, hc, hs);
            for (std::size_t i = 0; i < x.size(); ++i) {
              const bool ok = dc[i] == hc[i] && ds[i].code == hs[i].code &&
                              same(ds[i].decode, hs[i].decode) && same(ds[i].encode, hs[i].encode);
              c(ok, ok ? std::string()
                       : "operand entry " + hex(x[i]) + (stochastic ? " sr" : "") + " codes " +
                             std::to_string(dc[i]) + "/" + std::to_string(hc[i]) + " decode " +
                             hex(ds[i].decode) + "/" + hex(hs[i].decode));
            }
          }
        }
  report(c);
}
