// FP8 / MX scale computation against values worked out by hand from
// transformer_engine/common/recipe/delayed_scaling.cu (kernel, kernel_bulk),
// recipe_common.cuh (compute_scale_from_amax), TE's float_to_e8m0 and the OCP
// MX v1.0 shared-exponent rule.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "rpsim/formats/format.hpp"
#include "rpsim/scaling/fp8_scaling.hpp"

using namespace rpsim::sim;

namespace {
std::vector<float> hist(const DelayedScaling& d) {
  return d.history();
}
}  // namespace

TEST_CASE("delayed scaling: amax history roll and the max window", "[fp8][delayed]") {
  DelayedScalingConfig c;
  c.amax_history_len = 4;
  DelayedScaling d(c);
  CHECK(d.scale() == 1.0f);
  // Roll: new = [0, h[2], h[3], h[0]] (h[1], the oldest, drops out); amax = max of the old h.
  d.record_amax(1);
  d.update();
  CHECK(hist(d) == std::vector<float>{0, 0, 0, 1});
  CHECK(d.scale() == 448.0f);
  CHECK(d.scale_inv() == 1.0f / 448.0f);
  d.record_amax(2);
  d.update();
  CHECK(hist(d) == std::vector<float>{0, 0, 1, 2});
  CHECK(d.scale() == 224.0f);
  d.record_amax(3);
  d.update();
  CHECK(hist(d) == std::vector<float>{0, 1, 2, 3});
  CHECK(d.scale() == 448.0f / 3.0f);
  // The 3 recorded at step 3 keeps setting the scale for 4 updates (steps 3..6).
  for (int step = 4; step <= 6; ++step) {
    d.record_amax(step == 4 ? 0.5f : 0.25f);
    d.update();
    INFO("step " << step);
    CHECK(d.scale() == 448.0f / 3.0f);
  }
  CHECK(hist(d) == std::vector<float>{0, 0.5f, 0.25f, 0.25f});
  d.record_amax(0.25f);
  d.update();
  CHECK(d.scale() == 896.0f);  // max(0.5, 0.25, 0.25, 0.25)
}

TEST_CASE("delayed scaling: most_recent uses only this step's amax", "[fp8][delayed]") {
  DelayedScalingConfig c;
  c.amax_history_len = 4;
  c.amax_compute_algo = AmaxComputeAlgo::most_recent;
  DelayedScaling d(c);
  const float amaxes[] = {1, 2, 3, 0.5f, 0.25f};
  const float scales[] = {448, 224, 448.0f / 3.0f, 896, 1792};
  for (int i = 0; i < 5; ++i) {
    d.record_amax(amaxes[i]);
    d.update();
    CHECK(d.scale() == scales[i]);
  }
  CHECK(hist(d) == std::vector<float>{0, 3, 0.5f, 0.25f});  // the history still rolls
}

TEST_CASE("delayed scaling: margin and format maximum", "[fp8][delayed]") {
  DelayedScalingConfig c;
  c.margin = 1;  // scaled_max = 448 * 2^-1
  DelayedScaling d(c);
  d.record_amax(2);
  d.update();
  CHECK(d.scale() == 112.0f);
  DelayedScalingConfig e5m2;
  e5m2.fp8_max = 57344.0f;
  e5m2.margin = 2;
  DelayedScaling d2(e5m2);
  d2.record_amax(7);
  d2.update();
  CHECK(d2.scale() == 14336.0f / 7.0f);
}

TEST_CASE("delayed scaling: zero and non-finite amax keep the previous scale", "[fp8][delayed]") {
  // len 3: amaxes 8, 1, then two steps with nothing recorded.
  auto run = [](bool skip_on_zero) {
    DelayedScalingConfig c;
    c.amax_history_len = 3;
    c.skip_update_on_zero_amax = skip_on_zero;
    DelayedScaling d(c);
    std::vector<float> scales;
    for (const float a : {8.0f, 1.0f, 0.0f, 0.0f}) {
      d.record_amax(a);
      d.update();
      scales.push_back(d.scale());
    }
    return std::pair{scales, d.history()};
  };
  // kernel_bulk: no roll while amax is 0, and amax stays 0, so the scale stays
  // 448/8 = 56 with the 8 frozen in the history.
  const auto [bulk, bulk_hist] = run(true);
  CHECK(bulk == std::vector<float>{56, 56, 56, 56});
  CHECK(bulk_hist == std::vector<float>{0, 8, 1});
  // kernel: the roll goes on; at step 3 amax = max(8, 1, 0) = 8, at step 4 the
  // 8 has dropped out: amax = 1, scale 448.
  const auto [plain, plain_hist] = run(false);
  CHECK(plain == std::vector<float>{56, 56, 56, 448});
  CHECK(plain_hist == std::vector<float>{0, 0, 0});

  DelayedScaling d;
  d.record_amax(4);
  d.update();
  REQUIRE(d.scale() == 112.0f);
  d.record_amax(std::numeric_limits<float>::infinity());
  d.update();
  CHECK(d.scale() == 112.0f);  // amax inf: not finite, scale kept
  DelayedScaling n;
  n.record_amax(std::numeric_limits<float>::quiet_NaN());  // fmaxf drops the NaN
  CHECK(n.history()[0] == 0.0f);
}

TEST_CASE("delayed scaling: an amax so small the scale overflows gives FLT_MAX", "[fp8][delayed]") {
  DelayedScaling d;
  d.record_amax(std::numeric_limits<float>::denorm_min());
  d.update();
  CHECK(d.scale() == std::numeric_limits<float>::max());
  CHECK(d.scale_inv() == 1.0f / std::numeric_limits<float>::max());
}

TEST_CASE("current scaling: compute_scale_from_amax", "[fp8][current]") {
  CHECK(current_scale_from_amax(2.0f) == 224.0f);
  CHECK(current_scale_from_amax(0.0f) == 1.0f);
  CHECK(current_scale_from_amax(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(current_scale_from_amax(std::numeric_limits<float>::quiet_NaN()) == 1.0f);
  CurrentScalingConfig eps;
  eps.amax_epsilon = 1e-4f;
  CHECK(current_scale_from_amax(1e-10f, eps) == 448.0f / 1e-4f);
  CHECK(current_scale_from_amax(0.0f, eps) == 448.0f / 1e-4f);  // epsilon applies before the zero test
  CurrentScalingConfig pow2;
  pow2.force_pow_2_scales = true;
  CHECK(current_scale_from_amax(3.0f, pow2) == 128.0f);  // 149.33 -> 2^7
  CHECK(current_scale_from_amax(std::numeric_limits<float>::denorm_min(), pow2) == std::ldexp(1.0f, 127));
  CHECK(current_scale_from_amax(std::numeric_limits<float>::denorm_min()) ==
        std::numeric_limits<float>::max());
}

TEST_CASE("MX scale codes: OCP floor rule and TE round-up rule", "[fp8][mx]") {
  const auto& e4m3 = rpsim::format("e4m3");
  const auto& e2m1 = rpsim::format("e2m1");
  using R = MxScaleRule;
  // amax 448 = 1.75 * 2^8: OCP floor(log2) - emax = 8 - 8 = 0 -> 2^0; TE
  // 448 * float(1/448) rounds to exactly 1.0f, so no round-up either.
  CHECK(mx_scale_code(448, e4m3, R::ocp_floor) == 127);
  CHECK(mx_scale_code(448, e4m3, R::te_round_up) == 127);
  // 500 > 448: OCP keeps 2^0 (the element saturates when rounded), TE rounds up to 2^1.
  CHECK(mx_scale_code(500, e4m3, R::ocp_floor) == 127);
  CHECK(mx_scale_code(500, e4m3, R::te_round_up) == 128);
  // amax 1: OCP 2^(0 - 8); TE 1/448 = 2^-8.8 rounded up to 2^-8.
  CHECK(mx_scale_code(1, e4m3, R::ocp_floor) == 119);
  CHECK(mx_scale_code(1, e4m3, R::te_round_up) == 119);
  // amax 2: OCP 2^(1 - 8) = 2^-7; TE 2/448 = 2^-7.8 -> 2^-7.
  CHECK(mx_scale_code(2, e4m3, R::ocp_floor) == 120);
  CHECK(mx_scale_code(2, e4m3, R::te_round_up) == 120);
  // amax 200 = 2^7.64: OCP 2^(7-8) = 2^-1 (200/0.5 = 400 < 448 fits); TE 200/448 -> 2^-1.
  CHECK(mx_scale_code(200, e4m3, R::ocp_floor) == 126);
  CHECK(mx_scale_code(200, e4m3, R::te_round_up) == 126);
  // amax 256 = 2^8: OCP 2^0 (256 fits); TE 256/448 = 2^-0.8 -> 2^0.
  CHECK(mx_scale_code(256, e4m3, R::te_round_up) == 127);
  // amax 240 = 1.875 * 2^7: OCP 2^-1 -> 480 > 448 saturates; TE 240/448 -> 2^0.
  CHECK(mx_scale_code(240, e4m3, R::ocp_floor) == 126);
  CHECK(mx_scale_code(240, e4m3, R::te_round_up) == 127);
  // E2M1 (emax 2, max 6): amax 6 -> OCP 2^(2-2); TE 6 * float(1/6) rounds to 1.0f.
  CHECK(mx_scale_code(6, e2m1, R::ocp_floor) == 127);
  CHECK(mx_scale_code(6, e2m1, R::te_round_up) == 127);
  // Zero block: OCP log2(FP32_MIN_NORMAL) - 8 = -134 clamps to -127; TE float_to_e8m0(0) = 0.
  CHECK(mx_scale_code(0, e4m3, R::ocp_floor) == 0);
  CHECK(mx_scale_code(0, e4m3, R::te_round_up) == 0);
  // A tiny block amax: TE's subnormal product <= 2^-127 stays at code 0.
  CHECK(mx_scale_code(1e-40f, e4m3, R::te_round_up) == 0);
  // Top of the range: FLT_MAX = 2^127.99 -> OCP 127 - 8 = 119 (code 246);
  // TE FLT_MAX / 448 = 2^119.2 -> 2^120 (code 247).
  CHECK(mx_scale_code(std::numeric_limits<float>::max(), e4m3, R::ocp_floor) == 246);
  CHECK(mx_scale_code(std::numeric_limits<float>::max(), e4m3, R::te_round_up) == 247);
  // Non-finite: TE NaN -> 0xFF, inf -> 0xFE; OCP NaN either way.
  CHECK(mx_scale_code(std::numeric_limits<float>::quiet_NaN(), e4m3, R::te_round_up) == 0xFF);
  CHECK(mx_scale_code(std::numeric_limits<float>::infinity(), e4m3, R::te_round_up) == 0xFE);
  CHECK(mx_scale_code(std::numeric_limits<float>::infinity(), e4m3, R::ocp_floor) == 0xFF);
}

TEST_CASE("MX block scales: blocks of 32, a short tail, NaN handling per rule", "[fp8][mx]") {
  const auto& e4m3 = rpsim::format("e4m3");
  std::vector<float> v(70, 0.0f);
  v[5] = -448.0f;  // block 0: amax 448 (sign ignored)
  v[40] = 2.0f;    // block 1: amax 2
  v[33] = std::numeric_limits<float>::quiet_NaN();
  v[69] = 1.0f;  // block 2 (6 elements): amax 1
  const auto te = mx_block_scale_codes(v, e4m3, MxScaleRule::te_round_up);
  CHECK(te == std::vector<std::uint8_t>{127, 120, 119});  // TE's fmaxf skips the NaN
  const auto ocp = mx_block_scale_codes(v, e4m3, MxScaleRule::ocp_floor);
  CHECK(ocp == std::vector<std::uint8_t>{127, 0xFF, 119});  // torch.max propagates it
  CHECK(e8m0_to_float(127) == 1.0f);
  CHECK(e8m0_to_float(0) == std::ldexp(1.0f, -127));
  CHECK(e8m0_to_float(0xFE) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(e8m0_to_float(0xFF)));
  CHECK(amax_of(v) == 448.0f);
}
