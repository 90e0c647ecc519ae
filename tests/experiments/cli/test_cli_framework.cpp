// Each framework example config runs unchanged through the real rpsim train;
// every shipped training config runs a short version by default.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <filesystem>

#include "run_cli.hpp"

using rpsim::test::run_cli;

TEST_CASE("framework example configs run unchanged through rpsim train", "[framework]") {
  const auto configs = rpsim::test::source_dir() / "experiments/configs";
  const auto out = std::filesystem::temp_directory_path() / ("rpsim-framework-" + std::to_string(::getpid()));
  // Short runs on a slice of the data: the files themselves are untouched.
  const std::string quick =
      " --quiet --set steps=4 --set data.train_limit=512 --set data.test_limit=256 --set evaluate=false";
  struct Expect {
    const char* file;
    const char* says;
  };
  for (const Expect& e :
       {Expect{"deepspeed-fp16.json", "policy fp16-amp"}, Expect{"deepspeed-bf16.json", "policy bf16-amp"},
        Expect{"keras-mixed-float16.json", "policy fp16-amp"},
        Expect{"pytorch-gradscaler.json", "final loss scale 65536"},
        Expect{"te-fp8-delayed.json", "policy fp8"}}) {
    const auto dir = out / e.file;
    const auto r = run_cli("train " + (configs / e.file).string() + quick + " --out " + dir.string());
    INFO(e.file << "\n" << r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains(e.says));
    CHECK(std::filesystem::exists(dir / "steps.csv"));
    CHECK(std::filesystem::exists(dir / "meta.json"));
  }
  // With progress (no --quiet): the block must come before the first progress line.
  const auto r = run_cli("train " + (configs / "deepspeed-fp16.json").string() + quick.substr(8) + " --out " +
                         (out / "x").string());
  INFO(r.output);
  REQUIRE(quick.substr(0, 8) == " --quiet");
  // Said before any work: what the DeepSpeed file gave and what it ignored.
  const auto block = r.output.find("what will run");
  const auto ignored =
      r.output.find("ignored    fp16.auto_cast, zero_optimization (no meaning in a simulator)");
  CHECK(block != std::string::npos);
  const auto translated = r.output.find("fp16.enabled -> policy fp16-amp");
  REQUIRE(ignored != std::string::npos);
  REQUIRE(translated != std::string::npos);
  CHECK(block < translated);
  CHECK(block < ignored);
  const auto progress = r.output.find("train deepspeed-fp16: 4/4 steps");
  CHECK(progress != std::string::npos);
  CHECK(ignored < progress);
  std::filesystem::remove_all(out);
}

TEST_CASE("every shipped training config runs a short version by default and says how to run the full one",
          "[framework]") {
  const auto configs = rpsim::test::source_dir() / "experiments/configs";
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(configs)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("study-", 0) == 0 || name.rfind("sweep-", 0) == 0) continue;
    ++checked;
    const auto r = run_cli("train " + e.path().string() + " --plan --out " +
                           (std::filesystem::temp_directory_path() / "rpsim-plan-never-created").string());
    INFO(name << "\n" << r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output,
               Catch::Contains("(the config's \"steps\" limit; --set steps=0 runs the full epoch)"));
    CHECK_THAT(r.output, Catch::Contains("estimate   about"));
  }
  CHECK(checked >= 12);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::temp_directory_path() / "rpsim-plan-never-created"));
}
