// `rpsim train` through the real binary: bad configs fail before any work
// with the key named (exit 2); a small run writes its three files.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "run_cli.hpp"

namespace fs = std::filesystem;
using rpsim::test::run_cli;

namespace {

const char* kSmall = R"({
  "name": "cli-small", "seed": 1, "policy": "fp16-amp",
  "model": {"type": "mlp", "hidden": [16]},
  "data": {"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64},
  "optimizer": {"type": "sgd", "lr": 0.1},
  "batch_size": 64, "steps": 4
})";

// This process's folder, removed when the test program exits (ctest runs each
// case as a process of its own: the folders were left behind, one per case).
fs::path scratch() {
  static const struct Folder {
    fs::path path = fs::temp_directory_path() / ("rpsim-test-train-" + std::to_string(::getpid()));
    ~Folder() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } folder;
  fs::create_directories(folder.path);
  return folder.path;
}

fs::path write(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p) << text;
  return p;
}

}  // namespace

TEST_CASE("rpsim train: bad configs exit 2 naming the key", "[cli][train]") {
  const fs::path cfg = write("small.json", kSmall);
  const fs::path out = scratch() / "bad-out";
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases{
      {"--set optimizer.lr='\"x\"'", "small.json: optimizer.lr: expected a number, got \"x\""},
      {"--set optimizer.lr=-0.5", "optimizer.lr: must be a finite number >= 0"},
      {"--set batch_size=0", "batch_size: must be at least 1"},
      {"--set optimizer.betaz=1", "optimizer.betaz: unknown key"},
      {"--set policy=fp12-amp", "policy: unknown policy \"fp12-amp\""},
      {"--set 'policy={\"name\":\"bf16-amp\",\"weights\":\"bf17\"}'", "policy.weights: unknown format"},
      {"--set loss_scaler.policy=magic", "loss_scaler"},
      {"--set epochs='\"two\"'", "epochs: expected an integer, got \"two\""},
      {"--set 'policy={\"name\":\"fp16-amp\",\"accumulation\":\"tc:h999:fp16\"}'",
       "small.json: policy.accumulation: accumulation model 'tc:h999:fp16'"},
      {"--set 'policy={\"name\":\"fp32\",\"ops\":{\"linear\":{\"accumulation\":\"blocked:0\"}}}'",
       "small.json: policy.ops.linear.accumulation: accumulation model 'blocked:0'"},
      // A block-scaled instruction whose block is not the recipe's (NVFP4: 16).
      {"--set 'policy={\"name\":\"nvfp4\",\"ops\":{\"linear\":{\"accumulation\":"
       "\"tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3:scale_block=32\"}}}'",
       "small.json: policy.ops.linear.accumulation: "
       "'tc:b200:e2m1:binary32:tcgen05.mma:scale=ue4m3:scale_block=32' "
       "takes blocks of 32 (scale_block), the recipe makes blocks of 16 (fp8.block_size)"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli("train " + cfg.string() + " --quiet --out " + out.string() + " " + c.args);
    INFO(c.args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find(c.expect) != std::string::npos);
    CHECK_FALSE(fs::exists(out / "steps.csv"));
  }
  const fs::path broken = write("broken.json", "{\"seed\": 1,");
  const auto r = run_cli("train " + broken.string() + " --quiet");
  CHECK(r.status == 2);
  CHECK(r.output.find("broken.json: not valid JSON") != std::string::npos);
  CHECK(run_cli("train " + (scratch() / "missing.json").string()).status == 2);
}

// A corrupt data file is bad input, not an internal error: exit 2 naming the
// file, with no table written (it was "internal error", exit 3).
TEST_CASE("rpsim train: a corrupt Fashion-MNIST file exits 2 naming the file", "[cli][train]") {
  const fs::path cfg = write("small.json", kSmall);
  const char* stems[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                         "t10k-labels-idx1-ubyte"};
  // The labels of the test split, a valid one-dimensional IDX file of 2 labels.
  const std::string labels("\0\0\x08\x01\0\0\0\x02\x03\x04", 10);
  struct Case {
    std::string what, bad_name, bad_bytes, expect;
  };
  const std::vector<Case> cases{
      {"not gzip", "train-images-idx3-ubyte.gz", "plain text, not gzip", "gzip -dc failed"},
      {"not IDX", "train-images-idx3-ubyte", "plain text", "not an unsigned-byte IDX file"},
      {"truncated", "train-images-idx3-ubyte", std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x1c\0\0", 14),
       "truncated header"},
      {"short data", "train-images-idx3-ubyte",
       std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x02\0\0\0\x02\x01\x02", 18),
       "expected 8 data bytes, found 2"},
  };
  for (const auto& c : cases) {
    const fs::path dir = scratch() / ("idx-" + std::to_string(&c - cases.data()));
    fs::create_directories(dir);
    for (const char* stem : stems)
      if (std::string(stem) != "train-images-idx3-ubyte")
        std::ofstream(dir / stem, std::ios::binary) << labels;
    std::ofstream(dir / c.bad_name, std::ios::binary) << c.bad_bytes;
    const fs::path out = dir / "out";
    const auto r = run_cli("train " + cfg.string() + " --quiet --out " + out.string() +
                           " --set 'data={\"name\":\"fashion-mnist\",\"path\":\"" + dir.string() + "\"}'");
    INFO(c.what << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Catch::Contains((dir / c.bad_name).string()));
    CHECK_THAT(r.output, Catch::Contains(c.expect));
    CHECK_THAT(r.output, !Catch::Contains("internal error"));
    CHECK_FALSE(fs::exists(out / "steps.csv"));
  }
}

// Issue 25: the key tables are the one check of names and types, so every
// problem of a file is reported at once, each once, naming the file.
TEST_CASE("rpsim train: every unknown key and wrong type at once, each named once", "[cli][train]") {
  const fs::path cfg = write("two-wrongs.json", R"({"name": "two", "colour": "red",
    "model": {"type": "mlp", "hidden": [8], "hiden": [3]}, "optimizer": {"type": "sgd", "lr": "fast"}})");
  const auto r = run_cli("train " + cfg.string() + " --quiet --out " + (scratch() / "no").string());
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("two-wrongs.json: 3 problems:"));
  for (const char* field : {"colour: unknown key", "model.hiden: unknown key (did you mean hidden?)",
                            "optimizer.lr: expected a number, got \"fast\""}) {
    const auto at = r.output.find(field);
    CHECK(at != std::string::npos);
    CHECK(r.output.find(field, at + 1) == std::string::npos);
  }
  CHECK_FALSE(fs::exists(scratch() / "no"));
}

TEST_CASE("rpsim train --help lists the config keys from the key tables", "[cli][train]") {
  const auto r = run_cli("train --help");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("Config keys"));
  for (const char* row : {"optimizer.lr", "model.hidden", "loss_scaler.init_scale", "policy.fp8.margin",
                          "policy.ops.OP.accumulation"})
    CHECK_THAT(r.output, Catch::Contains(std::string("  ") + row + " "));
}

TEST_CASE("rpsim train: a small run writes steps, histograms and meta", "[cli][train]") {
  const fs::path cfg = write("small.json", kSmall);
  const fs::path out = scratch() / "run";
  const auto r = run_cli("train " + cfg.string() + " --out " + out.string() + " --set steps=3");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("SYNTHETIC") != std::string::npos);  // said loudly
  for (const char* f : {"steps.csv", "histograms.csv", "meta.json"}) CHECK(fs::exists(out / f));
  std::ifstream steps(out / "steps.csv");
  std::string header;
  std::getline(steps, header);
  CHECK(header.rfind("step,epoch,loss_emulated_nats,loss_fp64_nats,loss_scale,skipped,overflow_found", 0) ==
        0);
  int rows = 0;
  for (std::string line; std::getline(steps, line);) ++rows;
  CHECK(rows == 3);
  std::ifstream meta(out / "meta.json");
  const std::string text((std::istreambuf_iterator<char>(meta)), std::istreambuf_iterator<char>());
  CHECK(text.find("\"synthetic\": true") != std::string::npos);
  CHECK(text.find("\"master_weights_bytes\"") != std::string::npos);
  CHECK(text.find("\"git_commit\"") != std::string::npos);
  CHECK(text.find("\"partial\": false") != std::string::npos);
  fs::remove_all(scratch());
}

TEST_CASE("rpsim train: says what will run before any work, then progress, and names a partial epoch",
          "[cli][train]") {
  const fs::path cfg = write("small.json", kSmall);
  const fs::path out = scratch() / "plan";
  const auto r = run_cli("train " + cfg.string() + " --out " + out.string() + " --set steps=3");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto block = r.output.find("what will run");
  REQUIRE(block != std::string::npos);
  for (const char* item :
       {"model      mlp 784-16-10", "data       SYNTHETIC (asked for)", "policy     fp16-amp",
        "scaler     pytorch", "steps      3 of the 4 in 1 epoch", "output     ", "estimate   about"})
    CHECK(r.output.find(item, block) != std::string::npos);
  // The progress line (with its ETA or "done") comes after the block.
  const auto progress = r.output.find("train cli-small: 3/3 steps");
  REQUIRE(progress != std::string::npos);
  CHECK(block < progress);
  // 3 of the 4 steps of an epoch: not "epoch 1".
  CHECK(r.output.find("0.75 of epoch 1 (step 3): test accuracy") != std::string::npos);
  CHECK(r.output.find("epoch 1 (step") == r.output.find("0.75 of epoch 1 (step") + 8);
  fs::remove_all(scratch());
}

// Issue 26: the plan printed the gpt row's help text ("model.n_layer blocks of
// width model.n_embd ...") and the layers row's generic one, the noscale
// config read "dynamic loss scaling" beside "scaler none", and the "wrote"
// line left out evaluations.csv.
TEST_CASE("rpsim train: the plan describes the model built and the scaler used", "[cli][train]") {
  const fs::path configs = rpsim::test::source_dir() / "experiments" / "configs";
  auto r = run_cli("train " + (configs / "gpt-fp16-amp-noscale.json").string() + " --plan 2>&1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("2 blocks of width 64, 4 heads, 32 tokens per window"));
  CHECK_THAT(r.output, !Catch::Contains("model.n_layer") && !Catch::Contains("dynamic loss scaling"));
  CHECK_THAT(r.output, Catch::Contains("scaler     none"));
  CHECK_THAT(r.output, Catch::Contains("memory     about"));
  const fs::path layers = write("layers.json", R"({
    "name": "cli-layers", "model": {"type": "layers", "layers": [{"op": "linear", "out": 12}, {"op": "relu"},
    {"op": "linear", "out": 10}]}, "data": {"name": "synthetic", "synthetic_train_size": 64,
    "synthetic_test_size": 32}, "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 16, "steps": 2})");
  const fs::path out = scratch() / "layers-out";
  r = run_cli("train " + layers.string() + " --quiet --out " + out.string() + " 2>&1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("layers: linear(out=12), relu, linear(out=10)"));
  CHECK_THAT(r.output, Catch::Contains("wrote " + out.string() +
                                       "/steps.csv, histograms.csv, evaluations.csv, meta.json"));
  fs::remove_all(scratch());
}
