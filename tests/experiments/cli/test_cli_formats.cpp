// `rpsim explain` and `rpsim testfloat` as a user runs them: the real binary,
// its output and its exit status (0 ok, 1 mismatches, 2 bad input that the
// message names).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "run_cli.hpp"

using rpsim::test::run_cli;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A scratch input file, removed when the test ends.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& name, const std::string& content) {
    path = std::filesystem::temp_directory_path() / ("rpsim-test-" + std::to_string(::getpid()) + "-" + name);
    std::ofstream(path) << content;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  std::string str() const { return path.string(); }
};

// The line of `rpsim explain` output that starts with `label`.
std::string line_of(const std::string& output, const std::string& label) {
  const auto at = output.find("\n" + label);
  if (at == std::string::npos) return {};
  const auto end = output.find('\n', at + 1);
  return output.substr(at + 1, end - at - 1);
}

}  // namespace

TEST_CASE("explain 0.1 in binary16 shows the exact input, both neighbours and the rounded bits", "[cli]") {
  const auto r = run_cli("explain 0.1 --format binary16");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "0.1000000000000000055511151231257827021181583404541015625"));  // 0.1 as binary64
  CHECK(contains(line_of(r.output, "  below"), "0x2E66"));
  CHECK(contains(line_of(r.output, "  above"), "0x2E67"));
  CHECK(contains(line_of(r.output, "  result"), "0x2E66"));
  CHECK(contains(line_of(r.output, "  result"), "0.0999755859375"));
  CHECK(contains(line_of(r.output, "ulp"), "6.103515625e-05 (error = -0.4 ulp)"));
  CHECK(contains(line_of(r.output, "flags"), "inexact"));
  CHECK(contains(line_of(r.output, "all modes"),
                 "rne 0x2E66 rna 0x2E66 rtz 0x2E66 rd 0x2E66 ru 0x2E67 rodd 0x2E67"));

  const auto up = run_cli("explain 0.1 --format binary16 --rounding ru");
  REQUIRE(up.status == 0);
  CHECK(contains(line_of(up.output, "  result"), "0x2E67"));
}

TEST_CASE("explain in bfloat16, e4m3 (overflow to NaN) and a subnormal", "[cli]") {
  const auto bf = run_cli("explain 0.1 --format bf16");
  INFO(bf.output);
  REQUIRE(bf.status == 0);
  CHECK(contains(bf.output, "bfloat16"));
  CHECK(contains(line_of(bf.output, "  result"), "0x3DCD"));  // 0.10009765625
  CHECK(contains(line_of(bf.output, "  below"), "0x3DCC"));

  const auto e4 = run_cli("explain 1000 --format e4m3");
  INFO(e4.output);
  REQUIRE(e4.status == 0);
  CHECK(contains(line_of(e4.output, "  result"), "0x7F"));  // OCP E4M3FN: overflow is NaN
  CHECK(contains(line_of(e4.output, "  result"), "NaN"));
  CHECK(contains(line_of(e4.output, "  below"), "448"));
  CHECK(contains(line_of(e4.output, "  above"), "none"));
  CHECK(contains(line_of(e4.output, "flags"), "overflow"));
  CHECK(contains(line_of(e4.output, "overflowed"), "yes, to quiet NaN"));
  const auto e4_rtz = run_cli("explain 1000 --format e4m3 --rounding rtz");
  CHECK(contains(line_of(e4_rtz.output, "  result"), "0x7E"));  // toward zero stops at 448

  // 1e-7 is 1.68 of binary16's smallest subnormal 2^-24.
  const auto sub = run_cli("explain 1e-7 --format binary16");
  INFO(sub.output);
  REQUIRE(sub.status == 0);
  CHECK(contains(line_of(sub.output, "  below"), "0x0001"));
  CHECK(contains(line_of(sub.output, "  above"), "0x0002"));
  CHECK(contains(line_of(sub.output, "  result"), "0x0002"));
  CHECK(contains(line_of(sub.output, "  result"), "subnormal"));
  CHECK(contains(line_of(sub.output, "flags"), "underflow"));
  CHECK(contains(line_of(sub.output, "subnormal"), "yes"));
}

TEST_CASE("explain shows both neighbours of a representable value", "[cli]") {
  const auto r = run_cli("explain 1 --format binary16");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "representable: 0x3C00"));
  CHECK(contains(line_of(r.output, "  below"), "0x3BFF"));
  CHECK(contains(line_of(r.output, "  above"), "0x3C01"));
  CHECK(contains(line_of(r.output, "flags"), "exact"));
  const auto neg = run_cli("explain -2 --format e5m2");
  INFO(neg.output);
  REQUIRE(neg.status == 0);
  CHECK(contains(line_of(neg.output, "  below"), "-2.5"));
  CHECK(contains(line_of(neg.output, "  above"), "-1.75"));
  const auto sr = run_cli("explain 1.0009765625 --format bf16 --rounding sr --seed 7");
  INFO(sr.output);
  REQUIRE(sr.status == 0);
  CHECK(contains(line_of(sr.output, "sr"), "P(away from zero) = 0.125"));  // 2^-10 is 1/8 of bf16's ulp at 1
}

TEST_CASE("explain rejects bad input with exit 2 and names it", "[cli]") {
  struct Bad {
    const char* args;
    const char* named;
  };
  for (const Bad& bad :
       {Bad{"explain 0.1 --format nosuchformat", "nosuchformat"}, Bad{"explain 0.1 --format e0m3", "e0m3"},
        Bad{"explain 0.1 --format exp=5", "exp=5"}, Bad{"explain 0.1 --format e4m3zz", "e4m3zz"},
        Bad{"explain 0.1 --rounding nearest_odd", "nearest_odd"},
        Bad{"explain twelve --format binary16", "twelve"}, Bad{"explain 1.5x", "1.5x"}}) {
    const auto r = run_cli(bad.args);
    INFO(bad.args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, "rpsim: error: "));
    CHECK(contains(r.output, bad.named));
  }
}

TEST_CASE("testfloat reports passes and failures, bad input exits 2 naming file:line", "[cli]") {
  // 1 + 1 = 2 is right; 1 + 1 = 3 (0x4200) is wrong.
  const TempFile vectors("mixed.tv", "3C00 3C00 4000 00\n3C00 3C00 4200 00\n");
  const auto r = run_cli("testfloat f16_add --rounding rne " + vectors.str());
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(ends_with(r.output, "1 passed, 1 failed\n"));
  CHECK(contains(r.output, vectors.str() + ":2"));  // the mismatch names its line

  const TempFile good("good.tv", "3C00 3C00 4000 00\n\n3C00 0001 3C00 01\n");
  const auto ok = run_cli("testfloat f16_add < " + good.str());
  CHECK(ok.status == 0);
  CHECK(ends_with(ok.output, "2 passed, 0 failed\n"));
  // The same tiny addend under round-up moves 1 to its successor.
  const auto up = run_cli("testfloat f16_add --rounding ru " + good.str());
  CHECK(up.status == 1);
  CHECK(ends_with(up.output, "1 passed, 1 failed\n"));

  const TempFile malformed("malformed.tv", "3C00 3C00 4000 00\n3C00 zz 4200 00\n");
  const auto bad_line = run_cli("testfloat f16_add " + malformed.str());
  INFO(bad_line.output);
  CHECK(bad_line.status == 2);
  CHECK(contains(bad_line.output, malformed.str() + ":2"));
  CHECK(contains(bad_line.output, "'zz'"));

  const TempFile short_line("short.tv", "3C00 3C00 4000\n");
  const auto fields = run_cli("testfloat f16_add " + short_line.str());
  CHECK(fields.status == 2);
  CHECK(contains(fields.output, short_line.str() + ":1"));

  const auto op = run_cli("testfloat f16_frobnicate " + vectors.str());
  INFO(op.output);
  CHECK(op.status == 2);
  CHECK(contains(op.output, "frobnicate"));

  const auto missing = run_cli("testfloat f16_add /nonexistent/rpsim-vectors.tv");
  INFO(missing.output);
  CHECK(missing.status == 2);
  CHECK(contains(missing.output, "/nonexistent/rpsim-vectors.tv"));

  const TempFile empty("empty.tv", "");
  const auto nothing = run_cli("testfloat f16_add " + empty.str());
  CHECK(nothing.status == 2);  // checking nothing is not a pass
  CHECK(contains(nothing.output, empty.str()));

  const auto sr = run_cli("testfloat f16_add --rounding sr " + vectors.str());
  CHECK(sr.status == 2);
  CHECK(contains(sr.output, "sr"));
  const auto mode = run_cli("testfloat f16_add --rounding sideways " + vectors.str());
  CHECK(mode.status == 2);
  CHECK(contains(mode.output, "sideways"));
}

TEST_CASE("gemm's bounds use the unit roundoff of the model's own rounding", "[cli]") {
  // sequential:fp16:rtz rounds toward zero: u = 2^-10, not round-to-nearest's 2^-11.
  const auto rtz = run_cli("gemm --m 4 --n 4 --k 64 --model sequential:fp16:rtz");
  REQUIRE(rtz.status == 0);
  CHECK_THAT(rtz.output, Catch::Contains("unit_roundoff_u: 9.765625e-04"));
  const auto rne = run_cli("gemm --m 4 --n 4 --k 64 --model sequential:fp16");
  REQUIRE(rne.status == 0);
  CHECK_THAT(rne.output, Catch::Contains("unit_roundoff_u: 4.882812e-04"));
}

TEST_CASE("testfloat: E4M3's NaN widens with its payload (x86 SSE convention)", "[cli]") {
  // S.1111.111: quiet bit 1, payload 11, so binary32 0x7FF00000 / 0xFFF00000.
  const TempFile nan("e4m3_nan.tv", "7F 7FF00000 00\nFF FFF00000 00\n");
  const auto r = run_cli("testfloat e4m3_to_f32 " + nan.str());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(ends_with(r.output, "2 passed, 0 failed\n"));
  const TempFile canonical("e4m3_nan_old.tv", "7F 7FC00000 00\n");
  CHECK(run_cli("testfloat e4m3_to_f32 " + canonical.str()).status == 1);
}

TEST_CASE("explain: a format without subnormals names no min subnormal", "[cli]") {
  const auto off = run_cli("explain 1e-6 -f exp=5,man=2,subnormals=no");
  INFO(off.output);
  REQUIRE(off.status == 0);
  CHECK(off.output.find("min subnormal") == std::string::npos);
  CHECK(off.output.find("no subnormals") != std::string::npos);
  const auto on = run_cli("explain 1e-6 -f e5m2");
  CHECK(on.output.find("min subnormal 1.52587890625e-05") != std::string::npos);
}

TEST_CASE("rpsim help lists the commands, rpsim help COMMAND describes one, no command exits 2", "[cli]") {
  const auto all = run_cli("help");
  INFO(all.output);
  CHECK(all.status == 0);
  for (const char* command : {"explain", "gemm", "scaler", "study", "sweep", "train"})
    CHECK(all.output.find(std::string("\n  ") + command) != std::string::npos);
  const auto one = run_cli("help train");
  INFO(one.output);
  CHECK(one.status == 0);
  CHECK(one.output.find("--set") != std::string::npos);
  CHECK(one.output.find("--plan") != std::string::npos);
  const auto none = run_cli("");
  CHECK(none.status == 2);
  CHECK(none.output.find("rpsim help COMMAND") != std::string::npos);
}
