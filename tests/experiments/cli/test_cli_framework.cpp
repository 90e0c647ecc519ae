// Each framework example config runs unchanged through the real rpsim train.
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
  const auto r = run_cli("train " + (configs / "deepspeed-fp16.json").string() + quick + " --out " +
                         (out / "x").string());
  CHECK_THAT(r.output,
             Catch::Contains("ignored (no meaning in a simulator): fp16.auto_cast, zero_optimization"));
  std::filesystem::remove_all(out);
}
