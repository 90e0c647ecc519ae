// Every TestFloat vector in ../shared/testfloat, result bits and flags.
#include <catch2/catch.hpp>
#include <fstream>

#include "rpsim/formats/testfloat.hpp"
#include "shared_data.hpp"

using namespace rpsim;

TEST_CASE("every shared TestFloat vector file passes, flags included", "[testfloat]") {
  const auto dir = test::shared_dir() / "testfloat";
  if (!std::filesystem::exists(dir)) {
    RPSIM_SKIP("skipped: " << dir << " is absent");
  }
  std::size_t files = 0;
  std::uint64_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (entry.path().extension() != ".tv") continue;
    const auto dot = name.find('.');
    const std::string op = name.substr(0, dot);
    const std::string mode = name.substr(dot + 1, name.size() - dot - 4);
    const auto operation = testfloat::parse_operation(op);
    Rounding r;
    r.mode = parse_rounding(mode);
    std::ifstream in(entry.path());
    const auto s = testfloat::check_stream(operation, in, name, r);
    INFO(name << ": " << (s.first_failures.empty() ? "" : s.first_failures.front()));
    CHECK(s.failed == 0);
    CHECK(s.passed > 0);
    total += s.passed;
    ++files;
  }
  CHECK(files >= 100);
  CHECK(total > 500000);
}

TEST_CASE("a malformed TestFloat line names the file and line", "[testfloat]") {
  const auto op = testfloat::parse_operation("f16_add");
  CHECK_THROWS_WITH(testfloat::parse_line(op, "3C00 XYZ 4000 00", "v.tv:7"),
                    Catch::Contains("v.tv:7") && Catch::Contains("XYZ"));
  CHECK_THROWS_WITH(testfloat::parse_line(op, "3C00 3C00 4000", "v.tv:8"),
                    Catch::Contains("expected 4 fields"));
  CHECK_THROWS_AS(testfloat::parse_operation("f16_frobnicate"), FormatError);
  CHECK_THROWS_AS(testfloat::parse_operation("f17_add"), FormatError);
}
