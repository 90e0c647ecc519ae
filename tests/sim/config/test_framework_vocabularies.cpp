// The config vocabularies are one table (framework_config.hpp): a row added to
// it is recognised and translated by the loader, named by the run plan, and
// hinted at by the unknown-key errors and listed by the help, with no other
// edit. A toy framework stands in for the next one.
#include <catch2/catch.hpp>
#include <cctype>
#include <set>

#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/framework_config.hpp"
#include "rpsim/config/run_plan.hpp"
#include "shared_data.hpp"
#include "small_config.hpp"

using namespace rpsim::sim::config;
using nlohmann::json;

namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The help with its wrapping undone: each run of spaces and newlines one space.
std::string flat_help() {
  std::string out;
  for (char ch : framework_vocabularies_help())
    if (!std::isspace(static_cast<unsigned char>(ch)) || (!out.empty() && out.back() != ' '))
      out += std::isspace(static_cast<unsigned char>(ch)) ? ' ' : ch;
  return out;
}

std::string error_of(const json& j, const std::vector<std::string>& sets = {}) {
  try {
    (void)read_config_json(j, "x.json", sets).parse();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

// The toy framework's file: {"toy_batch": 8, "toy_lr": 0.5, "toy_logging": ...}
// beside rpsim's model, data, policy and steps.
void toy_translate(Translation& t, KeyReport& report) {
  const json in = std::move(t.config);
  t.config = json::object();
  check_object_keys(in, {"toy_batch", "toy_lr", "toy_logging", "policy", "model", "data", "steps"}, "",
                    report);
  for (const char* k : {"policy", "model", "data", "steps"})
    if (in.contains(k)) t.config[k] = in[k];
  if (in.contains("toy_batch")) {
    t.config["batch_size"] = in["toy_batch"];
    t.notes.push_back("toy_batch -> batch_size");
  }
  if (in.contains("toy_lr")) t.config["optimizer"] = {{"type", "sgd"}, {"lr", in["toy_lr"]}};
  if (in.contains("toy_logging")) t.ignored.push_back("toy_logging");
}

const char* const kToyIgnored[] = {"toy_logging"};
const UnsimulatedField kToyRefused[] = {{"toy_fused", false, "fused toy kernels"}};
const RefusedFields kToyBlocks[] = {{"", kToyRefused}};

FrameworkVocabulary toy_row() {
  return {.name = "toy",
          .framework = "Toy",
          .scope = VocabularyScope::file,
          .read_as = "a Toy config",
          .notes_heading = "from the Toy config",
          .recognised_by = "a toy_batch key",
          .help = "the toy framework's batch and rate",
          .recognise = [](const json& j) { return j.is_object() && j.contains("toy_batch"); },
          .translate = toy_translate,
          .field_names =
              [] {
                return std::vector<FieldName>{{"toy_batch", "batch_size"}, {"toy_lr", "optimizer.lr"}};
              },
          .extension_keys = nullptr,
          .ignored = kToyIgnored,
          .refused = kToyBlocks};
}

// A toy scaler block inside rpsim's vocabulary: {"toy_scaler": {"init_scale": S}}.
void toy_scaler_translate(Translation& t, KeyReport&) {
  const double scale = t.config["toy_scaler"].value("init_scale", 1.0);
  t.config.erase("toy_scaler");
  t.config["loss_scaler"] = {{"policy", "static"}, {"init_scale", scale}};
  t.notes.push_back("toy_scaler -> loss_scaler static");
}

FrameworkVocabulary toy_scaler_row() {
  return {.name = "toy-scaler",
          .framework = "Toy",
          .scope = VocabularyScope::inside,
          .read_as = "",
          .notes_heading = "",
          .recognised_by = "a toy_scaler block",
          .help = "the toy framework's static scale",
          .recognise = [](const json& j) { return j.is_object() && j.contains("toy_scaler"); },
          .translate = toy_scaler_translate,
          .field_names =
              [] {
                return std::vector<FieldName>{{"toy_scaler", "loss_scaler"}};
              },
          .extension_keys = [] { return std::vector<std::string>{"toy_scaler"}; },
          .ignored = {},
          .refused = {}};
}

json toy_file() {
  json j = rpsim::test::small_config("fp32");
  j.erase("batch_size");
  j["toy_batch"] = 8;
  j["toy_lr"] = 0.5;
  j["toy_logging"] = true;
  return j;
}

}  // namespace

TEST_CASE("vocabularies: one row each, rpsim's own last, every row complete", "[framework]") {
  const auto rows = framework_vocabularies();
  std::set<std::string> names;
  for (const auto& row : rows) {
    INFO(row.name);
    CHECK(names.insert(row.name).second);
    CHECK(row.recognise != nullptr);
    CHECK(row.translate != nullptr);
    CHECK(std::string(row.help).size() > 10);
    CHECK(std::string(row.recognised_by).size() > 5);
    if (row.scope == VocabularyScope::file)
      CHECK(std::string(row.read_as).find(row.framework) != std::string::npos);
  }
  CHECK(std::string(rows.back().name) == "rpsim");
  CHECK(names ==
        std::set<std::string>{"deepspeed", "keras", "pytorch-gradscaler", "transformer-engine", "rpsim"});
  const auto configs = rpsim::test::source_dir() / "experiments/configs";
  CHECK(std::string(recognise_vocabulary(read_config_file(configs / "deepspeed-bf16.json").raw).name) ==
        "deepspeed");
  CHECK(std::string(recognise_vocabulary(rpsim::test::small_config("fp32")).name) == "rpsim");
  CHECK(framework_extension_keys() == std::vector<std::string>{"grad_scaler", "fp8_recipe"});
  CHECK_THROWS_AS(framework_vocabulary("tensorflow"), std::logic_error);
  CHECK_THROWS_AS(AddedVocabulary(framework_vocabulary("deepspeed")), std::logic_error);
  // The help is the rows': each name, and the refusals each row's reader applies.
  const std::string help = flat_help();
  for (const auto& row : rows) CHECK_THAT(help, Catch::Contains(std::string(" ") + row.name + " ("));
  CHECK_THAT(help, Catch::Contains("fp16.fp16_master_weights_and_grads false"));
  CHECK_THAT(help, Catch::Contains("fp8_recipe.fp8_dpa false"));
  CHECK_THAT(help, Catch::Contains("zero_optimization"));
}

TEST_CASE("vocabularies: a new file row is read, named in the plan, hinted at in errors and helped",
          "[framework]") {
  const json toy = toy_file();
  // Without the row the file is rpsim's, and its keys unknown.
  CHECK(std::string(recognise_vocabulary(toy).name) == "rpsim");
  CHECK_THAT(error_of(toy), Catch::Contains("toy_batch: unknown key"));
  {
    const AddedVocabulary added(toy_row());
    // Parsing: recognised by the row, translated by it.
    const LoadedConfig l = read_config_json(toy, "toy.json");
    CHECK(l.vocabulary == "toy");
    const auto c = l.parse();
    CHECK(c.batch_size == 8);
    CHECK(c.optimizer.lr == 0.5);
    CHECK(has(l.notes, "toy_batch -> batch_size"));
    CHECK(has(l.ignored, "toy_logging"));
    // Names: the run plan says what the file was read as.
    const std::string plan = describe_run(l, c, plan_run(c), "");
    CHECK_THAT(plan, Catch::Contains("toy.json, read as a Toy config"));
    CHECK_THAT(plan, Catch::Contains("from the Toy config:\n    toy_batch -> batch_size"));
    // Errors: rpsim's name in a Toy file names the Toy one ...
    json wrong = toy;
    wrong["batch_size"] = 8;
    CHECK_THAT(error_of(wrong), Catch::Contains("batch_size: unknown key") &&
                                    Catch::Contains("this is a Toy config, which calls it toy_batch"));
    // ... and the Toy name in an rpsim file names rpsim's, or says it means nothing here.
    json mine = rpsim::test::small_config("fp32");
    CHECK_THAT(error_of(mine, {"toy_lr=1"}),
               Catch::Contains("toy_lr: unknown key") &&
                   Catch::Contains(
                       "that is Toy's name; this config is in rpsim's vocabulary, where it is optimizer.lr"));
    CHECK_THAT(error_of(mine, {"toy_logging=1"}),
               Catch::Contains("where it is nothing (no meaning in a simulator)"));
    // DeepSpeed's hints are unchanged beside it.
    CHECK_THAT(error_of(mine, {"gradient_clipping=1"}), Catch::Contains("where it is max_grad_norm"));
    // Help: the row, its refusals and what it ignores.
    const std::string help = flat_help();
    CHECK_THAT(help, Catch::Contains(" toy (a file) ") &&
                         Catch::Contains("the toy framework's batch and rate") &&
                         Catch::Contains("toy_fused false") && Catch::Contains("toy_logging"));
    CHECK(std::string(framework_vocabularies().back().name) == "rpsim");
  }
  // Gone with its guard.
  CHECK(std::string(recognise_vocabulary(toy).name) == "rpsim");
  CHECK_THROWS_AS(framework_vocabulary("toy"), std::logic_error);
}

TEST_CASE("vocabularies: a new row inside rpsim's is translated, allowed as a key and renamed in hints",
          "[framework]") {
  json j = rpsim::test::small_config("fp16-amp");
  j["toy_scaler"] = {{"init_scale", 8}};
  CHECK_THAT(error_of(j), Catch::Contains("toy_scaler: unknown key"));
  const AddedVocabulary added(toy_scaler_row());
  CHECK(has(framework_extension_keys(), "toy_scaler"));
  const LoadedConfig l = read_config_json(j, "x.json");
  CHECK(l.vocabulary == "rpsim");
  const auto c = l.parse();
  CHECK(c.loss_scaler->policy == "static");
  CHECK(c.loss_scaler->init_scale.value() == 8);
  CHECK_THAT(describe_run(l, c, plan_run(c), ""),
             Catch::Contains("framework names translated:\n    toy_scaler -> loss_scaler static"));
  // In a DeepSpeed file its key is rpsim's loss_scaler, which DeepSpeed calls fp16.
  const auto ds = rpsim::test::source_dir() / "experiments/configs/deepspeed-fp16.json";
  CHECK_THROWS_WITH(read_config_file(ds, {"toy_scaler.init_scale=2"}),
                    Catch::Contains("toy_scaler: unknown key") &&
                        Catch::Contains("this is a DeepSpeed config, which calls it fp16.loss_scale, fp16"));
}
