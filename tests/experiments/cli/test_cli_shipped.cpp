// What a new user runs first must run: every config in experiments/configs
// and every command of README.md's ```sh blocks (issue 26: the README's
// headline sweep failed on its first run). Sizes are bounded so the whole
// file takes well under two minutes on two cores: training configs run 2
// steps, sweeps 2 steps per run on one shard of about two runs, studies their
// --quick configuration; training configs skip the final evaluation (a CNN
// emulated over the 10000 test images took 2 minutes alone). Commands needing a GPU, ../shared or mpirun are
// skipped with a visible warning when those are absent; `make` targets (the
// build and the whole suite) are not run from a test, said as a warning.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "run_cli.hpp"

namespace fs = std::filesystem;
using rpsim::test::run_shell;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path scratch(const std::string& name) {
  auto d = fs::temp_directory_path() / ("rpsim-shipped-" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string quoted(const fs::path& p) {
  std::string s(1, '\'');  // built by appending: GCC 12's -Wrestrict misfires on "'" + std::string
  s += p.string();
  s += '\'';
  return s;
}

// A copy of sweep file `file` in `dir` whose base (inline, or the file it
// names) stops after 2 steps, and the --shard option that runs about two of
// its runs.
std::pair<fs::path, std::string> bounded_sweep(const fs::path& file, const fs::path& dir) {
  nlohmann::ordered_json s = nlohmann::ordered_json::parse(read(file));
  if (s["base"].is_string()) s["base"] = nlohmann::ordered_json::parse(read(file.parent_path() / s["base"]));
  s["base"]["steps"] = 2;
  std::size_t runs = 1;
  for (const auto& [key, values] : s["grid"].items()) runs *= values.size();
  const fs::path copy = dir / file.filename();
  std::ofstream(copy) << s.dump(2);
  return {copy, runs > 2 ? " --shard 0/" + std::to_string(runs / 2) : ""};
}

// The study a study-*.json configures: the longest study name its stem
// starts with (study-fixed-point-paper.json configures fixed-point).
std::string study_of(const std::string& stem, const std::string& list) {
  std::string name = stem.substr(6), best;
  std::istringstream lines(list);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string word;
    words >> word;
    if (!word.empty() && name.rfind(word, 0) == 0 && word.size() > best.size() &&
        (name.size() == word.size() || name[word.size()] == '-'))
      best = word;
  }
  return best;
}

// The command that runs shipped config `f` with bounded size; "" for a study
// config that test_cli_study's `study all --quick` runs (its default config,
// experiments/configs/study-NAME.json).
std::string bounded_command(const fs::path& f, const fs::path& tmp, const std::string& studies,
                            bool studies_too) {
  const std::string bin = rpsim::test::rpsim_binary(), stem = f.stem().string();
  const auto j = nlohmann::json::parse(read(f));
  if (j.is_object() && j.contains("grid")) {
    const auto [copy, shard] = bounded_sweep(f, tmp);
    return bin + " sweep " + quoted(copy) + " --jobs 2" + shard + " --out " + quoted(tmp / stem);
  }
  if (stem.rfind("study-", 0) == 0) {
    const std::string study = study_of(stem, studies);
    INFO("no study named by " << stem << " in:\n" << studies);
    REQUIRE(!study.empty());
    if (!studies_too || stem == "study-" + study) return "";
    return bin + " study " + study + " --quick --config " + quoted(f) + " --out " + quoted(tmp / stem);
  }
  return bin + " train " + quoted(f) + " --set steps=2 --set evaluate=false --quiet --out " +
         quoted(tmp / stem);
}

void run_shipped_configs(bool studies) {
  const fs::path configs = rpsim::test::source_dir() / "experiments" / "configs";
  const fs::path tmp = scratch(studies ? "studies" : "configs");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(configs))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 20);
  const std::string list = rpsim::test::run_cli("study list").output;
  int ran = 0;
  for (const fs::path& f : files) {
    const bool study = f.stem().string().rfind("study-", 0) == 0;
    if (study != studies) continue;
    const std::string command = bounded_command(f, tmp, list, studies);
    if (command.empty()) continue;
    const auto r = run_shell(command + " </dev/null");
    ++ran;
    INFO(command << "\n--- output ---\n" << r.output);
    CHECK(r.status == 0);
  }
  CHECK(ran >= 1);
  fs::remove_all(tmp.parent_path());  // the process's folder, not only this case's
}

}  // namespace

TEST_CASE("every shipped training and sweep config in experiments/configs runs (2 steps, one sweep shard)",
          "[cli][shipped]") {
  run_shipped_configs(false);
}

// The studies' default configs (study-NAME.json) run in test_cli_study's
// `study all --quick`; the others (study-fixed-point-paper.json) here, about
// a minute on a loaded machine, hence [long].
TEST_CASE("every other shipped study config runs --quick", "[cli][shipped][long]") {
  run_shipped_configs(true);
}

namespace {

// The README's ```sh blocks, one command per line (comment lines dropped,
// trailing comments cut, [optional] parts of a synopsis left out).
std::vector<std::string> readme_commands() {
  const std::string text = read(rpsim::test::source_dir() / "README.md");
  std::vector<std::string> out;
  const std::regex block("```sh\n([\\s\\S]*?)```");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), block); it != std::sregex_iterator(); ++it) {
    std::istringstream lines((*it)[1].str());
    for (std::string line; std::getline(lines, line);) {
      line = std::regex_replace(line, std::regex("\\s+#\\s.*$"), "");
      line = std::regex_replace(line, std::regex("\\s*\\[[^\\]]*\\]"), "");
      line = std::regex_replace(line, std::regex("^\\s+|\\s+$"), "");
      if (!line.empty() && line[0] != '#') out.push_back(line);
    }
  }
  return out;
}

bool python_module_built(const fs::path& build) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(build / "python" / "rpsim", ec))
    if (e.path().filename().string().rfind("_core", 0) == 0) return true;
  return false;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("every command of README.md's sh blocks runs (bounded sizes)", "[cli][shipped]") {
  const auto commands = readme_commands();
  REQUIRE(commands.size() >= 8);
  // A working folder where the README's relative paths hold: experiments/
  // and build/ of this tree, ../shared beside it, and a user's mine.npz (a
  // GEMM dumped under the preset the README checks it against).
  const fs::path base = scratch("readme"), work = base / "work";
  const fs::path bin = rpsim::test::rpsim_binary();
  fs::create_directories(work);
  fs::create_directory_symlink(rpsim::test::source_dir() / "experiments", work / "experiments");
  fs::create_directory_symlink(bin.parent_path(), work / "build");
  const bool shared = fs::exists(rpsim::test::shared_dir());
  if (shared) fs::create_directory_symlink(fs::absolute(rpsim::test::shared_dir()), base / "shared");
  const auto dump = run_shell(bin.string() +
                              " gemm --m 16 --n 16 --k 64 --input binary16 --model cublas:h100:fp16:fp32 "
                              "--dump " +
                              quoted(work / "mine.npz"));
  REQUIRE(dump.status == 0);
  int ran = 0;
  for (std::string c : commands) {
    if (c.rfind("make ", 0) == 0) {
      WARN("README command not run from a test (it builds and runs the whole suite): " << c);
      continue;
    }
    if (c.find("../shared") != std::string::npos && !shared) {
      WARN("skipped (no ../shared): " << c);
      continue;
    }
    if (c.find("python3") != std::string::npos && !python_module_built(bin.parent_path())) {
      WARN("skipped (the Python module is not built in " << bin.parent_path() << "): " << c);
      continue;
    }
    if (c.find("gpu-validate") != std::string::npos &&
        run_shell("command -v nvidia-smi >/dev/null && nvidia-smi -L").status != 0) {
      WARN("skipped (no CUDA device): " << c);
      continue;
    }
    if (c.find("gemm-check step0") != std::string::npos) {
      WARN(
          "skipped (needs a GPU training step captured by rpsim.torch.capture_gemms; the capture-and-check "
          "path is tested on CPU captures in tests/experiments/python/test_torch_capture.py): "
          << c);
      continue;
    }
    if (c.rfind("mpirun", 0) == 0) {
      if (run_shell("command -v mpirun").status != 0) {
        WARN("skipped (no mpirun): " << c);
        continue;
      }
      c = replace_all(c, "mpirun -np 4",
                      "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" mpirun --oversubscribe "
                      "--allow-run-as-root -np 2");
    }
    // Sweeps: the bounded copy (2 steps per run); Slurm's variables as one array task sets them.
    const std::smatch m = [&] {
      std::smatch found;
      std::regex_search(c, found, std::regex("experiments/configs/(sweep-[A-Za-z0-9_.-]+\\.json)"));
      return found;
    }();
    const std::string env = "export SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=16 SLURM_CPUS_PER_TASK=2; ";
    if (!m.empty()) {
      const fs::path copy =
          bounded_sweep(rpsim::test::source_dir() / "experiments/configs" / m[1].str(), base).first;
      c = replace_all(c, m[0].str(), copy.string());
    }
    c = replace_all(c, "--cases 100000", "--cases 1000");
    // An interactive interpreter: give it the import the README's Python block starts with.
    const std::string input =
        c.find("python3") != std::string::npos ? "import rpsim; print(rpsim.__name__)" : "";
    const auto r = run_shell("cd " + quoted(work) + " && " + env + "printf '" + input + "\\n' | " + c);
    ++ran;
    INFO("README command: " << c << "\n--- output ---\n" << r.output);
    CHECK(r.status == 0);
  }
  CHECK(ran >= 5);
  fs::remove_all(base.parent_path());
}
