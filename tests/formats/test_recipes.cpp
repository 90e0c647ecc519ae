// The recipe rows and the mechanism (recipe.hpp): options and their errors,
// NaN never encoded as a finite value, tiny and zero tensors, tiles,
// columnwise and row-scaled NVFP4, MXINT8, and ocp-mx (mx_quantize) against
// the OCP rule written independently in binary64.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "rpsim/formats/block_scale.hpp"
#include "rpsim/formats/recipe.hpp"

using namespace rpsim;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Values over a wide range of magnitudes, binary32, with zeros.
std::vector<float> wide(std::size_t n, std::uint32_t seed, int lo = -30, int hi = 30) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> m(-2, 2);
  std::uniform_int_distribution<int> e(lo, hi), z(0, 15);
  std::vector<float> x(n);
  for (auto& v : x) v = z(g) == 0 ? 0.0f : std::ldexp(m(g), e(g));
  return x;
}

}  // namespace

TEST_CASE("recipes: the rows, their options and the errors naming them", "[formats][recipes]") {
  std::vector<std::string> names;
  for (const auto& r : recipes()) names.emplace_back(r.name);
  CHECK(names ==
        std::vector<std::string>{"te-nvfp4", "torchao-mx", "ocp-mx", "te-fp8-block", "te-fp8-current"});
  for (const auto& r : recipes()) {
    CHECK_FALSE(r.reference.empty());
    CHECK_NOTHROW(recipe_spec(r.name));  // the defaults make a spec
  }
  CHECK_THROWS_WITH(recipe_spec("nvfp4"),
                    Catch::Contains("unknown recipe 'nvfp4'") && Catch::Contains("te-nvfp4"));
  CHECK_THROWS_WITH(recipe_spec("te-nvfp4", {{"formla", "x"}}),
                    Catch::Contains("unknown option 'formla'") && Catch::Contains("formula"));
  CHECK_THROWS_WITH(recipe_spec("te-nvfp4", {{"formula", "te-2025"}}),
                    Catch::Contains("'te-2025' is not one of te-2026-03|te-2026-02"));
  CHECK_THROWS_WITH(recipe_spec("torchao-mx", {{"block", "3x"}}), Catch::Contains("not an integer"));
  CHECK_THROWS_WITH(recipe_spec("te-nvfp4", {{"rht", "true"}}), Catch::Contains("columnwise"));
  CHECK_THROWS_WITH(recipe_spec("te-nvfp4", {{"formula", "te-2026-02"}, {"four_over_six", "mae"}}),
                    Catch::Contains("te-2026-02"));
  CHECK_THROWS_WITH(recipe_spec("te-nvfp4", {{"e4m3_max", "256"}}), Catch::Contains("four_over_six"));
  CHECK_THROWS_WITH(recipe_spec("ocp-mx", {{"scale_rule", "rceil"}}), Catch::Contains("unknown option"));
  const QuantSpec s =
      recipe_spec("te-fp8-block", {{"tile", "128x128"}, {"pow2", "true"}, {"element", "e5m2"}});
  CHECK(
      (s.tile_rows == 128 && s.tile_cols == 128 && s.pow2_scales && s.element == recipe::ElementKind::e5m2));
  CHECK_THROWS_WITH(quantize(recipe_spec("te-nvfp4", {{"direction", "columnwise"}, {"rht", "true"}}),
                             std::vector<float>(8 * 4), 8, 4),
                    Catch::Contains("multiple of 16"));
}

TEST_CASE("recipes: a NaN anywhere in a tensor is never encoded as a finite value", "[formats][recipes]") {
  const std::vector<std::pair<const char*, RecipeOptions>> rows = {
      {"te-nvfp4", {}},
      {"te-nvfp4", {{"formula", "te-2026-02"}}},
      {"te-nvfp4", {{"tile", "16x16"}, {"four_over_six", "mse"}}},
      {"te-nvfp4", {{"row_scaled", "true"}}},
      {"te-nvfp4", {{"direction", "columnwise"}, {"rht", "true"}}},
      {"torchao-mx", {{"element", "e2m1"}, {"scale_rule", "even"}}},
      {"torchao-mx", {{"scale_rule", "rceil"}}},
      {"ocp-mx", {{"element", "int8"}}},
      {"te-fp8-block", {{"pow2", "true"}}},
      {"te-fp8-block", {{"tile", "128x128"}}},
      {"te-fp8-current", {{"element", "e5m2"}}},
      {"te-fp8-current", {{"pow2", "true"}}},
  };
  for (const auto& [name, options] : rows)
    for (std::size_t at : {0u, 77u, 511u}) {
      std::vector<float> x = wide(32 * 16, 7 + unsigned(at));
      x[at] = kNaN;
      const Quantized q = quantize(recipe_spec(name, options), x, 32, 16);
      const std::vector<double> d = dequantize(q);
      // Where the entry lands in the quantised tensor (x^T when columnwise;
      // the RHT spreads it over its 16-group).
      const std::size_t r = at / 16, c = at % 16, i = q.spec.columnwise ? c * 32 + r : at;
      INFO(name << " NaN at " << at);
      CHECK(std::isnan(d[i]));
    }
}

TEST_CASE("recipes: NVFP4 tensors of tiny, zero and infinite amax, -0 and NaN as TE has them",
          "[formats][recipes]") {
  const QuantSpec nv = recipe_spec("te-nvfp4");
  // amax 1e-37 < 2688 / FLT_MAX: ges is clamped at FLT_MAX, the blocks keep
  // non-zero scales and codes, and the tensor does not decode to zeros.
  std::vector<float> tiny(16, 0.0f);
  tiny[0] = 1e-37f;
  tiny[1] = -5e-38f;
  const Quantized t = quantize(nv, tiny, 1, 16);
  CHECK(t.tensor_encode[0] == std::numeric_limits<float>::max());
  CHECK(t.scale_codes[0] != 0);
  CHECK(t.codes[0] == 7);
  CHECK(dequantize(t)[0] != 0.0);
  // An all-zero tensor: ges FLT_MAX, scales 0, codes 0.
  const Quantized z = quantize(nv, std::vector<float>(32, 0.0f), 1, 32);
  CHECK(z.tensor_encode[0] == std::numeric_limits<float>::max());
  CHECK(z.scale_codes == std::vector<std::uint8_t>{0, 0});
  // -0.0 is code 0 (TE's ladder), -0.1 * enc in [-0.25, 0) is code 8.
  std::vector<float> x(16, 0.0f);
  x[0] = 6.0f;
  x[1] = -0.0f;
  x[2] = -0.2f;
  const Quantized s = quantize(nv, x, 1, 16);
  CHECK(s.codes[1] == 0);
  CHECK(s.codes[2] == 8);
  // An infinity without NaN: ges = 1, the infinity's block scale 448, its code 7.
  x[3] = std::numeric_limits<float>::infinity();
  const Quantized i = quantize(nv, x, 1, 16);
  CHECK(i.tensor_encode[0] == 1.0f);
  CHECK(i.scale_codes[0] == 0x7e);
  CHECK(i.codes[3] == 7);
}

TEST_CASE("recipes: NVFP4 columnwise quantises x^T with its own amax, row-scaled has one amax per row",
          "[formats][recipes]") {
  const std::vector<float> x = wide(16 * 32, 3);
  const Quantized col = quantize(recipe_spec("te-nvfp4", {{"direction", "columnwise"}}), x, 16, 32);
  std::vector<float> xt(x.size());
  for (std::size_t r = 0; r < 16; ++r)
    for (std::size_t c = 0; c < 32; ++c) xt[c * 16 + r] = x[r * 32 + c];
  const Quantized row = quantize(recipe_spec("te-nvfp4"), xt, 32, 16);
  CHECK((col.rows == 32 && col.cols == 16));
  CHECK(col.codes == row.codes);
  CHECK(col.scale_codes == row.scale_codes);
  const Quantized rs = quantize(recipe_spec("te-nvfp4", {{"row_scaled", "true"}}), x, 16, 32);
  REQUIRE(rs.amax.size() == 16);
  for (std::size_t r = 0; r < 16; ++r) {
    const Quantized one =
        quantize(recipe_spec("te-nvfp4"), std::span<const float>(x).subspan(r * 32, 32), 1, 32);
    CHECK(rs.amax[r] == one.amax[0]);
    CHECK(std::equal(one.codes.begin(), one.codes.end(), rs.codes.begin() + long(r) * 32));
  }
}

TEST_CASE("recipes: FP8 block tiles 1x128 and 128x128 (zero-padded), per-tensor without the clamp",
          "[formats][recipes]") {
  std::vector<float> x = wide(130 * 3, 5, -3, 3);
  const Quantized b = quantize(recipe_spec("te-fp8-block", {{"tile", "128x128"}}), x, 130, 3);
  CHECK((b.scale_rows == 2 && b.scale_cols == 1));
  const Quantized v = quantize(recipe_spec("te-fp8-block"), x, 130, 3);
  CHECK((v.scale_rows == 130 && v.scale_cols == 1));
  // 1x128 over a row of 3: the reference pads to 128 with zeros, amax of the 3.
  float amax = 0;
  for (int c = 0; c < 3; ++c) amax = std::max(amax, std::fabs(x[c]));
  CHECK(v.scales[0] == 1.0f / (448.0f / amax));
  // A power-of-two scale of amax 448 + 1 ulp: 448 / amax rounds to just
  // below 1, frexp exponent 0, scale 2^-1.
  const float over = std::nextafter(448.0f, 1000.0f);
  const Quantized p =
      quantize(recipe_spec("te-fp8-current", {{"pow2", "true"}}), std::vector<float>{over, 1.0f}, 1, 2);
  CHECK(p.scales[0] == 2.0f);
  CHECK(p.codes[0] == 0x76);  // 224
}

TEST_CASE("recipes: MXINT8 (ocp-mx element=int8): scale 2^floor(log2 amax), elements k/64",
          "[formats][recipes]") {
  std::vector<float> x(32, 0.0f);
  x[0] = 3.0f;    // floor(log2 3) = 1: X = 2
  x[1] = -0.75f;  // -0.375 * 64 = -24
  x[2] = 0.01f;   // 0.005 * 64 = 0.32 -> 0
  x[3] = 3.999f;  // 1.9995 * 64 = 127.97 -> 128, saturated to 127
  const Quantized q = quantize(recipe_spec("ocp-mx", {{"element", "int8"}}), x, 1, 32);
  CHECK(q.scale_codes[0] == 128);
  CHECK(q.codes[0] == 96);
  CHECK(q.codes[1] == std::uint8_t(-24));
  CHECK(q.codes[2] == 0);
  CHECK(q.codes[3] == 127);
  CHECK(dequantize(q)[1] == -0.75);
  // FLT_MAX: the exponent 127 with emax 0 reaches E8M0's largest scale.
  const Quantized m =
      quantize(recipe_spec("ocp-mx", {{"element", "int8"}}), std::vector<float>(32, 3.4e38f), 1, 32);
  CHECK(m.scale_codes[0] == 254);
}

TEST_CASE("recipes: ocp-mx (mx_quantize) against the OCP rule in binary64 on binary32 values",
          "[formats][mx]") {
  // The rule written independently: X = 2^clamp(floor(log2 amax) - emax,
  // -127, 127), P = V / X exactly, clamped to +-max, rounded to nearest even.
  for (const char* name : {"e4m3", "e5m2", "e3m2", "e2m3", "e2m1"}) {
    const Format& f = parse_format(name);
    for (std::uint32_t seed = 1; seed <= 20; ++seed) {
      const std::vector<float> xf = wide(96, seed, seed % 2 ? -140 : -20, seed % 3 ? 20 : 127);
      const std::vector<double> x(xf.begin(), xf.end());
      const BlockQuantized q = mx_quantize(f, x, 32);
      for (std::size_t b = 0; b < 3; ++b) {
        double amax = 0;
        for (std::size_t i = b * 32; i < b * 32 + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
        const int e = std::clamp(amax == 0 ? -127 : std::ilogb(amax) - f.emax, -127, 127);
        INFO(name << " seed " << seed << " block " << b);
        CHECK(q.scales[b] == std::ldexp(1.0, e));
        for (std::size_t i = b * 32; i < b * 32 + 32; ++i) {
          const double p = std::clamp(x[i] / std::ldexp(1.0, e), -f.max_finite(), f.max_finite());
          CHECK(q.elements[i] == to_double(f, round_double(f, p, RoundingMode::nearest_even)));
        }
      }
    }
  }
}
