// Per-layer adaptive loss scaling against values worked out by hand from
// kumasento/gradient-scaling ada_loss/chainer_impl/ada_loss.py
// (get_loss_scale_by_approx_range, bound_loss_scale_by_heuristics, rescaling).
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "rpsim/scaling/adaptive_loss_scaling.hpp"

using namespace rpsim::sim;

namespace {
// g ~ N(0, 1e-6) within +-4e-6, W ~ N(0, 0.05) within +-0.2, 64-long dot products.
AdaptiveLayerInput small_gradient_layer() {
  AdaptiveLayerInput in;
  in.grad = {0.0, 1e-6, -4e-6, 4e-6};
  in.weight = {0.0, 0.05, -0.2, 0.2};
  in.fan_in = 64;
  return in;
}
}  // namespace

TEST_CASE("adaptive: underflow-driven scale and its bounds", "[scaler][adaptive]") {
  AdaptiveLossScaling ada;
  // sigma = sqrt(1e-12 * 0.0025) = 5e-8; z = sqrt(2) erfinv(1e-3) = 1.2533141e-3;
  // s = 6e-8 / (z * sigma) = 957.46; overflow bound (65504 / 64) / 8e-7 = 1.28e9.
  const double unbound = ada.unbound_scale(small_gradient_layer());
  CHECK(unbound == Approx(957.46).epsilon(1e-4));
  // Bounds: min(1024 / carried, s), then min(16, s), then 2^floor(log2 s).
  CHECK(ada.layer_scale(small_gradient_layer(), 1) == 16);
  CHECK(ada.layer_scale(small_gradient_layer(), 128) == 8);     // 1024 / 128
  CHECK(ada.layer_scale(small_gradient_layer(), 100) == 8);     // 10.24 -> 8
  CHECK(ada.layer_scale(small_gradient_layer(), 2048) == 0.5);  // the accumulated cap can shrink
  AdaptiveLossScalingConfig no_bound;
  no_bound.use_bound = false;
  CHECK(AdaptiveLossScaling(no_bound).layer_scale(small_gradient_layer(), 1) == 512);  // 957.46 -> 2^9
}

TEST_CASE("adaptive: overflow bound from the extreme products and fan-in", "[scaler][adaptive]") {
  AdaptiveLayerInput in;
  in.grad = {1.0, 10.0, -50.0, 100.0};
  in.weight = {0.0, 1.0, -3.0, 2.0};
  in.fan_in = 1000;
  AdaptiveLossScaling ada;
  // o_max = max(|100*2|, |-50*-3|, |100*-3|, |-50*2|) = 300; (65504 / 1000) / 300.
  CHECK(ada.unbound_scale(in) == Approx(65.504 / 300));
  CHECK(ada.layer_scale(in, 1) == 0.125);
  AdaptiveLossScalingConfig no_fan_in;
  no_fan_in.bound_by_fan_in = false;
  CHECK(AdaptiveLossScaling(no_fan_in).unbound_scale(in) ==
        Approx(1.0));  // max(u_min/(z sigma), 1) = 1 < 218
}

TEST_CASE("adaptive: zero gradient gives scale 1", "[scaler][adaptive]") {
  AdaptiveLayerInput in = small_gradient_layer();
  in.grad = moments_of(std::vector<float>(10, 0.0f));
  AdaptiveLossScaling ada;
  CHECK(ada.unbound_scale(in) == 1);
  CHECK(ada.layer_scale(in, 1) == 1);
}

TEST_CASE("adaptive: moments are numpy mean and population std", "[scaler][adaptive]") {
  const std::vector<float> v{1, 2, 3, 4};
  const auto m = moments_of(v);
  CHECK(m.mean == 2.5);
  CHECK(m.std == Approx(std::sqrt(1.25)));
  CHECK(m.min == 1);
  CHECK(m.max == 4);
}

TEST_CASE("adaptive: branch rescaling target", "[scaler][adaptive]") {
  AdaptiveLossScaling ada;
  auto target = [&](std::vector<double> s, std::vector<double> m) { return ada.rescale_target(s, m); };
  CHECK(target({4, 16}, {1000, 2000}) == 16);    // 16 * 2000 < 65504
  CHECK(target({4, 64}, {2000, 1000}) == 4);     // 64 * 2000 overflows, 4 * 2000 does not
  CHECK(target({64, 128}, {4000, 1}) == 16);     // neither fits: halve 64 until 16 * 4000 < 65504
  CHECK(target({64, 128}, {1e6, 1}) == 0.0625);  // the loop stops below 1/8 and 62500 happens to fit
  CHECK_THROWS_AS(target({64, 128}, {2e6, 1}), std::range_error);
  CHECK_THROWS_AS(target({64}, {1}), std::invalid_argument);
}

TEST_CASE("adaptive: invalid settings name the field", "[scaler][adaptive]") {
  AdaptiveLossScalingConfig c;
  c.underflow_fraction = 0;
  CHECK_THROWS_WITH(AdaptiveLossScaling(c), Catch::Contains("underflow_fraction"));
  AdaptiveLayerInput in = small_gradient_layer();
  in.fan_in = 0;
  CHECK_THROWS_WITH(AdaptiveLossScaling().unbound_scale(in), Catch::Contains("fan_in"));
  CHECK_THROWS_WITH(AdaptiveLossScaling().layer_scale(small_gradient_layer(), 0), Catch::Contains("carried"));
}
