// The tables of `rpsim grads`: hand-counted rows for a two-tensor dump in
// fp16 (histogram with its zero bin, fractions at two scales, the suggested
// scale range per group) and the errors it names.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "rpsim/scaling/gradient_report.hpp"

using namespace rpsim;
using namespace rpsim::sim::scaling;

namespace {

bool has_line(const std::string& csv, const std::string& line) {
  std::istringstream in(csv);
  for (std::string l; std::getline(in, l);)
    if (l == line) return true;
  return false;
}

}  // namespace

TEST_CASE("scaling: gradient report rows for a hand-made dump", "[scaling]") {
  // act: 0, 0, 2^-30 (zero in fp16 at scale 1, a subnormal from 2^6 up),
  // 2^-20 (subnormal), 1.0 (normal); param: 2^10 and 2^15 (overflow from 2^1).
  const std::vector<double> act = {0.0, 0.0, 0x1p-30, 0x1p-20, 1.0};
  const std::vector<double> param = {0x1p10, -0x1p15};
  const std::vector<NamedValues> tensors = {{"act_grad/fc1", act}, {"param_grad/fc1.weight", param}};
  const std::vector<const Format*> fmts = {&formats::binary16()};
  const GradientReport r = gradient_report(tensors, fmts, 0, 8);

  CHECK(has_line(r.histogram_csv, "act_grad/fc1,zero,2,0.4"));
  CHECK(has_line(r.histogram_csv, "act_grad/fc1,-30,1,0.2"));
  CHECK(has_line(r.histogram_csv, "param_grad/fc1.weight,15,1,0.5"));
  // scale 1: 2^-30 lost, 2^-20 subnormal, of three non-zero values.
  CHECK(has_line(r.fractions_csv,
                 "act_grad/"
                 "fc1,binary16,0,1,5,2,0,0.3333333333333333,0.3333333333333333,0"));
  // scale 2^6: 2^-24 is the smallest subnormal; 2^-14 is normal.
  CHECK(has_line(r.fractions_csv, "act_grad/fc1,binary16,6,64,5,2,0,0,0.3333333333333333,0"));
  CHECK(has_line(r.fractions_csv, "param_grad/fc1.weight,binary16,1,2,2,0,0,0,0,0.5"));
  // act: nothing overflows up to 2^8 and 2^6..2^8 lose nothing; param: only
  // scale 1 keeps 2^15 finite; together: scale 1, losing 2^-30 (1 of 5).
  CHECK(has_line(r.scale_range_csv, "binary16,act_grad,1,6,8,0"));
  CHECK(has_line(r.scale_range_csv, "binary16,param_grad,1,0,0,0"));
  CHECK(has_line(r.scale_range_csv, "binary16,all,1,0,0,0.2"));
  REQUIRE(r.findings.size() == 3);
  CHECK(r.findings[0].find("2^6..2^8") != std::string::npos);
}

TEST_CASE("scaling: gradient report names a bad range or an empty dump", "[scaling]") {
  const std::vector<double> v = {1.0};
  const std::vector<NamedValues> one = {{"x", v}};
  const std::vector<const Format*> fmts = {&formats::binary16()};
  CHECK_THROWS_WITH(gradient_report(one, fmts, 3, 2), Catch::Contains("2^3..2^2 is empty"));
  CHECK_THROWS_WITH(gradient_report({}, fmts, 0, 2), Catch::Contains("no tensors"));
}
