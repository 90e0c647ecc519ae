// The study framework's config loader: "extends" merges a variant onto its
// base as an RFC 7386 merge patch.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "rpsim/study/study.hpp"

using namespace rpsim::sim::study;
namespace fs = std::filesystem;

namespace {

fs::path temp_folder() {
  const fs::path dir = fs::temp_directory_path() / ("rpsim-study-extends-" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  return dir;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("study configs: extends merges onto the base, null removes, arrays replace", "[study]") {
  const fs::path dir = temp_folder();
  write(dir / "base.json", R"({"seed": 1, "train": {"x": 1, "y": 2}, "runs": [1, 2], "quick": {"seed": 5}})");
  // A base two levels up the chain, named relative to the extending file.
  write(dir / "sub" / "middle.json", R"({"extends": "../base.json", "train": {"x": 10}})");
  write(dir / "variant.json", R"({"extends": "sub/middle.json", "train": {"y": null, "z": 3}, "runs": [3]})");
  const StudyConfig c = StudyConfig::load(dir / "variant.json", false);
  const nlohmann::json& v = c.values();
  CHECK(v.at("seed") == 1);
  CHECK(v.at("train") == nlohmann::json::parse(R"({"x": 10, "z": 3})"));
  CHECK(v.at("runs") == nlohmann::json::parse("[3]"));
  CHECK_FALSE(v.contains("extends"));
  CHECK(StudyConfig::load(dir / "variant.json", true).values().at("seed") == 5);  // the base's quick section

  write(dir / "loop.json", R"({"extends": "loop.json"})");
  try {
    (void)StudyConfig::load(dir / "loop.json", false);
    FAIL("a config extending itself was accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("nests more than 8 deep") != std::string::npos);
  }
  fs::remove_all(dir);
}
