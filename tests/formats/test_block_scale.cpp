// MX (OCP MX v1.0 Sec. 6.3) and NVFP4 block quantisation against values
// worked out by hand from the specifications (block_scale.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "rpsim/formats/block_scale.hpp"
#include "rpsim/formats/format.hpp"

using namespace rpsim;

TEST_CASE("mx_quantize: E8M0 scale floor(log2 amax) - emax, elements RNE with saturation", "[formats][mx]") {
  const Format e4m3 = parse_format("e4m3");
  // amax 300: floor(log2 300) = 8 = emax(e4m3) -> X = 2^0. 300 lies between
  // 288 and 320 (spacing 32 at 2^8): 288. 0.001 is 0.512 of e4m3's least
  // subnormal 2^-9: rounds up to it. 2^-20 rounds to 0.
  auto q = mx_quantize(e4m3, std::vector<double>{1.0, 300.0, -0.001, std::ldexp(1.0, -20)}, 4);
  REQUIRE(q.scales.size() == 1);
  CHECK(q.scales[0] == 1.0);
  CHECK(q.scale_codes[0] == 127);
  CHECK(q.elements == std::vector<double>{1.0, 288.0, -std::ldexp(1.0, -9), 0.0});
  // amax 500: floor(log2 500) = 8 -> X = 1; 500 > 448 saturates to 448 (not NaN).
  q = mx_quantize(e4m3, std::vector<double>{500.0, -500.0}, 2);
  CHECK(q.elements == std::vector<double>{448.0, -448.0});

  const Format e2m1 = parse_format("e2m1");
  // Two blocks of 4: amax 6.5 -> floor 2 = emax(e2m1) -> X = 1; 6.5
  // saturates to 6, 0.3 -> 0.5 (nearer than 0), -3.2 -> -3. amax 0.1 ->
  // floor(log2 0.1) = -4 -> X = 2^-6 (E8M0 code 121); 0.1 * 64 = 6.4 -> 6,
  // 0.02 * 64 = 1.28 -> 1.5 (nearer than 1), 0.004 * 64 = 0.256 -> 0.5.
  q = mx_quantize(e2m1, std::vector<double>{6.5, 0.3, -3.2, 0.0, 0.1, 0.02, -0.004, 0.0}, 4);
  REQUIRE(q.scales.size() == 2);
  CHECK(q.scales == std::vector<double>{1.0, std::ldexp(1.0, -6)});
  CHECK(q.scale_codes == std::vector<std::uint8_t>{127, 121});
  CHECK(q.elements == std::vector<double>{6.0, 0.5, -3.0, 0.0, 6.0, 1.5, -0.5, 0.0});
  const auto d = dequantize(q);
  CHECK(d[4] == 6.0 / 64);
  CHECK(d[5] == 1.5 / 64);
}

TEST_CASE("mx_quantize: scale range, zero blocks, NaN blocks, a short last block and bad input",
          "[formats][mx]") {
  const Format e5m2 = parse_format("e5m2");
  // 2^127: shared_exp 127 - 15 = 112 (code 239); 1.75 * 2^127 / 2^112 =
  // 57344 exactly.
  auto q = mx_quantize(e5m2, std::vector<double>{std::ldexp(1.75, 127), 0.0, 0.0}, 2);
  REQUIRE(q.scales.size() == 2);  // the last block holds one value
  CHECK(q.scale_codes[0] == 239);
  CHECK(q.elements[0] == 57344.0);
  // An all-zero block takes the least scale 2^-127 (code 0).
  CHECK(q.scale_codes[1] == 0);
  CHECK(q.scales[1] == std::ldexp(1.0, -127));
  q = mx_quantize(e5m2, std::vector<double>{1.0, std::numeric_limits<double>::quiet_NaN()}, 2);
  CHECK(q.scale_codes[0] == 0xff);
  CHECK(std::isnan(dequantize(q)[0]));
  // The values are read as binary32, as the references read them: 2^200
  // becomes infinity, and its block decodes to NaN (MXINT8 reaches the
  // clamp at 127 with binary32 inputs: ocp-mx's tests).
  q = mx_quantize(e5m2, std::vector<double>{std::ldexp(1.0, 200), 1.0}, 2);
  CHECK(q.scale_codes[0] == 0xff);
  CHECK(std::isnan(dequantize(q)[1]));
  CHECK_THROWS_WITH(mx_quantize(parse_format("binary16"), std::vector<double>{1.0}, 32),
                    Catch::Contains("'binary16' is not an OCP MX element format"));
  CHECK_THROWS_WITH(mx_quantize(e5m2, std::vector<double>{1.0}, 0), Catch::Contains("block size"));
}

TEST_CASE("nvfp4_quantize: E4M3 block scale of amax/6 under the FP32 tensor scale 6*448/amax",
          "[formats][nvfp4]") {
  // Tensor amax 1 -> s_enc = 2688. Block 1 (amax 1): fp32(1/6) * 2688 =
  // 448.0000134 -> fp32 448.00002 -> E4M3 448 (saturating; code 0x7e);
  // x * fp32(2688 / 448) = 6x: 1 -> 6, 0.5 -> 3, 0.1 -> 0.6 -> 0.5.
  // Block 2 (amax 0.01): fp32(0.01/6) * 2688 = 4.48 -> E4M3 4.5 (spacing 0.5
  // at 4; code 0x49); fp32(2688/4.5) = 597.3333; 0.01 -> 5.973 -> 6,
  // 0.004 -> 2.389 -> 2.
  std::vector<double> v(32, 0.0);
  v[0] = 1.0;
  v[1] = 0.5;
  v[2] = -0.1;
  v[16] = 0.01;
  v[17] = 0.004;
  const auto q = nvfp4_quantize(v);
  REQUIRE(q.scales.size() == 2);
  CHECK(q.scale_codes == std::vector<std::uint8_t>{0x7e, 0x49});
  CHECK(q.scales == std::vector<double>{448.0, 4.5});
  CHECK(q.tensor_scale == 1.0 / 2688.0);
  CHECK(q.elements[0] == 6.0);
  CHECK(q.elements[1] == 3.0);
  CHECK(q.elements[2] == -0.5);
  CHECK(q.elements[16] == 6.0);
  CHECK(q.elements[17] == 2.0);
  const auto d = dequantize(q);
  CHECK(d[0] == Approx(1.0));
  CHECK(d[16] == Approx(6.0 * 4.5 / 2688.0));
  // A zero tensor: scale 1, codes 0, elements 0.
  const auto z = nvfp4_quantize(std::vector<double>(16, 0.0));
  CHECK(z.scale_codes == std::vector<std::uint8_t>{0});
  CHECK(z.elements == std::vector<double>(16, 0.0));
}

TEST_CASE("nvfp4_quantize: a NaN is never lost, a tiny amax does not decode to zeros (TE's FLT_MAX clamp)",
          "[formats][nvfp4]") {
  // Before the te-nvfp4 row, a NaN rounded to E2M1 code 0 under a finite
  // scale (decoding to 0), and amax 1e-37 made s_enc = fp32(2688 / amax) = inf,
  // tensor_scale 0: the whole tensor decoded to zeros.
  std::vector<double> v(32, 0.25);
  v[20] = std::numeric_limits<double>::quiet_NaN();
  const auto q = nvfp4_quantize(v);
  for (double d : dequantize(q)) CHECK(std::isnan(d));  // TE: a NaN amax makes every scale NaN
  std::vector<double> tiny(16, 0.0);
  tiny[0] = 1e-37;
  const auto t = nvfp4_quantize(tiny);
  CHECK(t.tensor_scale > 0.0);
  CHECK(dequantize(t)[0] > 0.0);
}
