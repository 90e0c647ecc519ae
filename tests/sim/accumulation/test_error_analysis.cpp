// Error measures and bounds: values checked by hand.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "rpsim/accumulation/error_analysis.hpp"

using namespace rpsim;
using namespace rpsim::sim;

TEST_CASE("unit roundoff and gamma_n", "[error]") {
  CHECK(unit_roundoff(formats::binary32()) == std::ldexp(1, -24));
  CHECK(unit_roundoff(formats::binary16()) == std::ldexp(1, -11));
  CHECK(unit_roundoff(formats::bfloat16(), RoundingMode::toward_zero) == std::ldexp(1, -7));
  CHECK(unit_roundoff(formats::bfloat16(), RoundingMode::stochastic) == std::ldexp(1, -7));
  const double u = std::ldexp(1, -11);
  CHECK(gamma_n(1, u) == Approx(u / (1 - u)));
  CHECK(gamma_n(100, u) == Approx(100 * u / (1 - 100 * u)));
  CHECK(std::isinf(gamma_n(2048, u)));  // n u = 1
  CHECK(std::isinf(gamma_n(5000, u)));
  // Probabilistic: ~ lambda sqrt(n) u, far below gamma_n for large n.
  CHECK(probabilistic_gamma_n(10000, std::ldexp(1, -24)) == Approx(100 * std::ldexp(1, -24)).epsilon(1e-3));
  CHECK(probabilistic_gamma_n(1000, u, 2.0) < gamma_n(1000, u));
  CHECK(probabilistic_gamma_n(1000, u, 2.0) ==
        Approx(std::expm1(2 * std::sqrt(1000.0) * u + 1000 * u * u / (1 - u))));
}

TEST_CASE("ulp and errors in ulps", "[error]") {
  CHECK(ulp(formats::binary32(), 1.0) == std::ldexp(1, -23));
  CHECK(ulp(formats::binary32(), 1.5) == std::ldexp(1, -23));
  CHECK(ulp(formats::binary32(), -2.0) == std::ldexp(1, -22));
  CHECK(ulp(formats::binary16(), 0.0) == std::ldexp(1, -24));
  CHECK(ulp(formats::binary16(), std::ldexp(1, -20)) == std::ldexp(1, -24));  // subnormal range
  CHECK(error_in_ulps(formats::binary16(), 1 + std::ldexp(1, -10), 1.0) == 1.0);
  CHECK(error_in_ulps(formats::binary16(), 1.0, 1.0) == 0.0);
  CHECK(error_in_ulps(formats::binary32(), 1.0, 1 + std::ldexp(1, -25)) == 0.25);
  CHECK(std::isinf(error_in_ulps(formats::binary32(), std::numeric_limits<double>::infinity(), 1.0)));
}

TEST_CASE("condition number, comparison statistics and dot bounds", "[error]") {
  const std::vector<double> a{1, 1}, b{1, -0.5};
  CHECK(dot_condition_number(a, b) == 3.0);  // (1 + 0.5) / 0.5
  CHECK(std::isinf(dot_condition_number(std::vector<double>{1, -1}, std::vector<double>{1, 1})));
  const std::vector<double> computed{1.0, 2.0 + std::ldexp(1, -22), -4.0};
  const std::vector<double> exact{1.0, 2.0, -4.0 - std::ldexp(1, -20)};
  const auto s = compare(computed, exact, formats::binary32());
  CHECK(s.count == 3);
  CHECK(s.max_abs == std::ldexp(1, -20));
  CHECK(s.mean_abs == Approx((std::ldexp(1, -22) + std::ldexp(1, -20)) / 3));
  CHECK(s.max_ulps == 2.0);           // 2^-20 at |exact| in [4, 8), where the binary32 ulp is 2^-21
  CHECK(s.mean_ulps == Approx(1.0));  // (0 + 1 + 2) / 3
  CHECK(s.max_rel == Approx(std::ldexp(1, -22)).epsilon(1e-5));  // 2^-20 / (4 + 2^-20)
  Eigen::MatrixXd m1(1, 2), m2(2, 1);
  CHECK_THROWS_WITH(compare(m1, m2, formats::binary32()), Catch::Contains("1x2"));
  const double u = std::ldexp(1, -24);
  CHECK(dot_error_bound(a, b, u) == gamma_n(2, u) * 1.5);
  CHECK(dot_probabilistic_error_bound(a, b, u) == probabilistic_gamma_n(2, u) * 1.5);
}
