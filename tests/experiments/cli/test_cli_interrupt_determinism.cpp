// Through the real binary: an interrupted training run (SIGINT) keeps the
// steps done in OUT-partial/ and says where it stopped, an interrupted study
// writes no table; the same study config and seed give byte-identical tables
// with 1 and 2 threads and on a rerun (wall times aside).
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "run_cli.hpp"

namespace fs = std::filesystem;
using rpsim::test::run_shell;

namespace {

fs::path scratch(const std::string& what) {
  const fs::path d = fs::temp_directory_path() / ("rpsim-test-" + what + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `args` in the background, sends SIGINT once `seconds` have passed,
// and reports the exit status as "exit=N" at the end of the output.
rpsim::test::CliResult interrupt_after(const std::string& args, double seconds) {
  // A background job of a non-interactive shell starts with SIGINT ignored;
  // rpsim installs its own handler, so the signal still reaches it.
  std::string cmd = "{ " + rpsim::test::rpsim_binary();
  cmd += " " + args + " & pid=$!; sleep " + std::to_string(seconds) +
         "; kill -INT $pid; wait $pid; echo \"exit=$?\"; }";
  return run_shell(cmd);
}

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("rpsim train: SIGINT stops at a step boundary and keeps the steps done in OUT-partial",
          "[cli][interrupt]") {
  const fs::path dir = scratch("interrupt-train");
  // Far more steps than can run before the signal.
  std::ofstream(dir / "long.json") << R"({
    "name": "interrupt", "seed": 3, "policy": "fp16-amp",
    "model": {"type": "mlp", "hidden": [64]},
    "data": {"name": "synthetic", "synthetic_train_size": 512, "synthetic_test_size": 64},
    "optimizer": {"type": "sgd", "lr": 0.05},
    "batch_size": 64, "steps": 10000000, "shadow": true
  })";
  const fs::path out = dir / "run", partial = dir / "run-partial";
  const auto r = interrupt_after("train " + (dir / "long.json").string() + " --out " + out.string(), 3.0);
  INFO(r.output);
  CHECK(r.output.find("exit=130") != std::string::npos);
  CHECK(r.output.find("interrupted at step") != std::string::npos);
  // The one behaviour (README, Training): the steps done in OUT-partial/, and
  // OUT itself absent (issue 26: an empty OUT was left beside the partial one).
  CHECK(!fs::exists(out));
  REQUIRE(r.output.find(partial.string() + "/") != std::string::npos);
  CHECK(files_under(partial) ==
        std::vector<fs::path>{"evaluations.csv", "histograms.csv", "meta.json", "steps.csv"});
  const auto meta = nlohmann::json::parse(slurp(partial / "meta.json"));
  CHECK(meta.at("partial") == true);
  CHECK(meta.at("planned_steps") == 10000000);
  const std::int64_t steps = meta.at("steps");
  CHECK(steps > 0);
  const std::string csv = slurp(partial / "steps.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == steps + 1);  // header and one row per step done
  // A later complete run of the same output removes the stale partial results.
  const auto done = run_shell(rpsim::test::rpsim_binary() + " train " + (dir / "long.json").string() +
                              " --set steps=2 --quiet --out " + out.string());
  INFO(done.output);
  CHECK(done.status == 0);
  CHECK(fs::exists(out / "meta.json"));
  CHECK(!fs::exists(partial));
  fs::remove_all(dir);
}

TEST_CASE("rpsim study: SIGINT inside a training run writes none of that study's tables",
          "[cli][interrupt]") {
  const fs::path dir = scratch("interrupt-study");
  const fs::path out = dir / "underflow";
  const auto r = interrupt_after("study underflow --out " + out.string(), 2.0);
  INFO(r.output);
  CHECK(r.output.find("exit=130") != std::string::npos);
  CHECK(r.output.find("stopped by interrupt at step") != std::string::npos);
  CHECK(r.output.find("loss scale") != std::string::npos);  // which run it was in
  CHECK(files_under(out).empty());
  fs::remove_all(dir);
}

TEST_CASE("rpsim study: same config and seed give identical tables on rerun and with 1 or 2 threads",
          "[cli][determinism]") {
  const fs::path dir = scratch("determinism-study");
  // underflow runs the training simulator (parallel rounding and matmuls);
  // summation has the stochastic-rounding sums.
  for (const char* study : {"underflow", "summation"}) {
    INFO(study);
    std::vector<fs::path> outs;
    for (const char* run : {"t1", "t1-again", "t2"}) {
      const fs::path out = dir / study / run;
      const std::string threads = std::string(run) == "t2" ? "2" : "1";
      const auto r = run_shell("OMP_NUM_THREADS=" + threads + " " + rpsim::test::rpsim_binary() + " study " +
                               study + " --quick --out " + out.string());
      INFO(r.output);
      REQUIRE(r.status == 0);
      outs.push_back(out);
    }
    const auto files = files_under(outs[0]);
    REQUIRE(files.size() >= 2);
    for (std::size_t k = 1; k < outs.size(); ++k) {
      CHECK(files_under(outs[k]) == files);
      for (const auto& f : files) {
        INFO(outs[k] / f);
        if (f == "meta.json") {
          auto a = nlohmann::json::parse(slurp(outs[0] / f));
          auto b = nlohmann::json::parse(slurp(outs[k] / f));
          // The clock fields are the only ones allowed to differ.
          for (const char* clock : {"wall_time_s", "finished_utc"}) {
            CHECK(a.contains(clock));
            a.erase(clock);
            b.erase(clock);
          }
          CHECK(a == b);
        } else {
          CHECK(slurp(outs[0] / f) == slurp(outs[k] / f));
        }
      }
    }
  }
  fs::remove_all(dir);
}

// Issue #36: Ctrl-C killed tc-validate mid-print, its last line cut in half
// ("...binary16->b"); it stops between two files now, every line whole, and
// says where it stopped (exit 130). The MMA-Sim files of ../shared, each 8
// times (symbolic links), are far more than can be checked before the signal.
TEST_CASE("rpsim tc-validate: SIGINT stops between files and every line is whole", "[cli][interrupt]") {
  const fs::path mma = rpsim::test::shared_dir() / "mma-sim";
  if (!fs::is_directory(mma)) RPSIM_SKIP("skipped: no MMA-Sim vectors at " + mma.string());
  const fs::path dir = scratch("interrupt-tc-validate");
  fs::create_directories(dir / "files");
  for (const auto& e : fs::directory_iterator(mma))
    if (e.path().extension() == ".txt")
      for (int i = 0; i < 8; ++i) {
        std::ostringstream name;  // not "c" + to_string(i) + ...: GCC 12's -Wrestrict false positive
        name << 'c' << i << '_' << e.path().filename().string();
        fs::create_symlink(e.path(), dir / "files" / name.str());
      }
  // Job control (set -m): a background job then receives SIGINT as from a terminal.
  const fs::path out = dir / "out.txt";
  const auto r = run_shell("bash -c 'set -m; " + rpsim::test::rpsim_binary() + " tc-validate " +
                           (dir / "files").string() + " >" + out.string() +
                           " 2>&1 & pid=$!; sleep 2; kill -INT $pid; wait $pid; echo exit=$?'");
  INFO(r.output);
  CHECK(r.output.find("exit=130") != std::string::npos);
  const std::string text = slurp(out);
  INFO(text);
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  std::istringstream lines(text);
  std::string line;
  std::size_t files = 0, stopped = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("rpsim tc-validate: interrupted after ", 0) == 0) {
      ++stopped;
      continue;
    }
    CHECK(line.find(".txt: ") != std::string::npos);
    CHECK(line.back() == ')');  // "NAME.txt: 2000/2000 (model ...)"
    ++files;
  }
  CHECK(stopped == 1);
  CHECK(files > 0);
  fs::remove_all(dir);
}
