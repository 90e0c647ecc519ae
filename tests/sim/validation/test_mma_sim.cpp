// MMA-Sim vectors (shared/mma-sim, an excerpt in tests/data/mma-sim): the
// header -> preset mapping, strict parsing, and the presets' agreement.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "rpsim/validation/mma_sim_vectors.hpp"
#include "run_cli.hpp"
#include "shared_data.hpp"

namespace {

namespace fs = std::filesystem;
using namespace rpsim;
using namespace rpsim::sim;

fs::path excerpt_dir() {
  return rpsim::test::source_dir() / "tests" / "data" / "mma-sim";
}

// Files where real-GPU data (tc-golden, tc-stress) contradict MMA-Sim, the
// hardware winning: file -> the most lines allowed to differ (README,
// "Tensor Core model": the MMA-Sim agreement column).
const std::map<std::string, std::size_t>& hardware_exceptions() {
  static const std::map<std::string, std::size_t> m = {};
  return m;
}

}  // namespace

TEST_CASE("mma-sim: the excerpt in tests/data passes bit for bit", "[tc][mma-sim]") {
  const auto files = mma_sim_files(excerpt_dir());
  REQUIRE(files.size() >= 8);
  for (const auto& p : files) {
    const auto f = load_mma_sim_file(p);
    std::string why;
    const auto m = mma_sim_model(f, why);
    INFO(p.filename().string() << ": " << why);
    REQUIRE(m.has_value());
    const auto r = check_mma_sim(f, *m, 3);
    for (const auto& line : r.first_mismatches) INFO(line);
    CHECK(r.total == f.cases.size());
    CHECK(r.total > 0);
    CHECK(r.passed == r.total);
  }
}

TEST_CASE("mma-sim: every shared file has a preset and agrees", "[tc][mma-sim][shared]") {
  const fs::path dir = rpsim::test::shared_dir() / "mma-sim";
  if (!fs::is_directory(dir)) {
    RPSIM_SKIP("shared/mma-sim not found under " << rpsim::test::shared_dir().string());
  }
  const auto files = mma_sim_files(dir);
  CHECK(files.size() == 193);
  std::size_t cases = 0;
  for (const auto& p : files) {
    const auto f = load_mma_sim_file(p);
    std::string why;
    const auto m = mma_sim_model(f, why);
    const std::string name = p.stem().string();
    INFO(name << ": " << why);
    REQUIRE(m.has_value());
    const auto r = check_mma_sim(f, *m, 3);
    for (const auto& line : r.first_mismatches) INFO(line);
    const auto it = hardware_exceptions().find(name);
    CHECK(r.total - r.passed <= (it == hardware_exceptions().end() ? 0 : it->second));
    cases += r.total;
  }
  CHECK(cases == 193 * 2000);
}

TEST_CASE("mma-sim: the header names the preset and instruction", "[tc][mma-sim]") {
  MmaSimFile f;
  auto target = [&](const char* arch, const char* family, const char* q) {
    f.arch = arch;
    f.family = family;
    f.qualifier = q;
    const auto t = mma_sim_target(f);
    return t.preset + " " +
           (t.instruction ? std::string(tensor_core_instruction_name(*t.instruction)) : "none");
  };
  CHECK(target("Hopper", "wgmma", "m64n8k32.f32.e4m3.e5m2") == "h100 wgmma");
  CHECK(target("RTX Blackwell", "mma_block_scale", "m16n8k64.block16.f32.e2m1.e2m1.f32.ue4m3") ==
        "rtx5090 mma.sync");
  CHECK(target("Blackwell", "tcgen05mma", "m128n8k16.f32.f16.bf16") == "b200 tcgen05.mma");
  CHECK(target("CDNA2", "mfma", "f32_32x32x8bf16_1k") == "mi250 mfma.1k");
  CHECK(target("CDNA3", "mfma", "f32_16x16x32_fp8_bf8") == "mi300 mfma");
  CHECK(target("Turing", "mma", "m16n8k8.f32.f16.f16.f32") == "t4 mma.sync");
  CHECK(target("Pascal", "mma", "m8n8k4.f32.f16.f16.f32") == " mma.sync");
}

TEST_CASE("mma-sim: malformed files are rejected naming file, line and field", "[tc][mma-sim]") {
  const fs::path src = excerpt_dir() / "Hopper__wgmma__m64n8k32.f32.e4m3.e5m2.txt";
  REQUIRE(fs::exists(src));
  std::ifstream in(src);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const fs::path tmp = fs::temp_directory_path() / "rpsim_mma_sim_bad.txt";
  auto write_with = [&](const std::string& find, const std::string& replace) {
    std::ofstream out(tmp);
    bool done = false;
    for (auto l : lines) {
      if (!done && l.find(find) != std::string::npos) {
        l.replace(l.find(find), find.size(), replace);
        done = true;
      }
      out << l << "\n";
    }
    REQUIRE(done);
  };
  write_with("# a_format: e4m3", "# a_format: e9m9");
  CHECK_THROWS_WITH(load_mma_sim_file(tmp),
                    Catch::Contains("a_format 'e9m9'") && Catch::Contains(tmp.string()));
  write_with("# K: 32", "# K: 31");
  CHECK_THROWS_WITH(load_mma_sim_file(tmp), Catch::Contains("fields"));
  const std::string first_case = lines[std::size_t(
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l[0] != '#'; }) -
      lines.begin())];
  write_with(first_case, "zz" + first_case.substr(2));
  CHECK_THROWS_WITH(load_mma_sim_file(tmp), Catch::Contains("'zz' is not 2 hex digits"));
  // A file rpsim has no preset for is counted and listed, never passed.
  write_with("# arch: Hopper", "# arch: Pascal");
  const auto r = rpsim::test::run_cli("tc-validate " + tmp.string());
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output,
             Catch::Contains("no preset: rpsim_mma_sim_bad.txt (40 cases): no preset for architecture "
                             "'Pascal'"));
  CHECK_THAT(r.output, Catch::Contains("0 passed, 0 failed; 0/0 files at 100%, 1 files with no preset"));
  fs::remove(tmp);
}

TEST_CASE("mma-sim: rpsim tc-validate checks a folder and reports per file", "[tc][mma-sim][cli]") {
  const auto r = rpsim::test::run_cli("tc-validate " + excerpt_dir().string());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("Hopper__wgmma__m64n8k32.f32.e4m3.e5m2.txt: 40/40"));
  CHECK_THAT(r.output, Catch::Contains(" passed, 0 failed"));
  const auto bad = rpsim::test::run_cli("tc-validate " + (excerpt_dir() / "README.md").string());
  CHECK(bad.status == 2);
  CHECK_THAT(bad.output, Catch::Contains("not an MMA-Sim vector file"));
  const auto model = rpsim::test::run_cli("tc-validate " + excerpt_dir().string() + " --model h100");
  CHECK(model.status == 2);
  CHECK_THAT(model.output, Catch::Contains("--model and --instruction apply to tc-golden folders only"));
}
