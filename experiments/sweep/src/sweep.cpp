#include "rpsim/sweep/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "rpsim/config/config_file.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/io/json_keys.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::sim::sweep {
namespace {

// Ordered, so that grid axes keep the order the user wrote them in.
nlohmann::ordered_json read_json(const std::filesystem::path& file, const std::string& what) {
  std::ifstream in(file);
  if (!in) throw std::invalid_argument(fmt::format("{} '{}': cannot open", what, file.string()));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("{} '{}': not valid JSON: {}", what, file.string(), e.what()));
  }
  if (const std::string key = io::duplicate_json_key(text); !key.empty())
    throw std::invalid_argument(
        fmt::format("{} '{}': {}", what, file.string(), io::duplicate_json_key_message(key)));
  return j;
}

std::string value_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Letters, digits and -_.= stay; anything else becomes '_'.
std::string safe(const std::string& s) {
  std::string r;
  for (char c : s)
    r += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '=') ? c
                                                                                                       : '_';
  return r;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string r = "\"";
  for (char c : s) {
    if (c == '"') r += '"';
    r += c;
  }
  r += '"';
  return r;
}

std::string number(double v) {
  return fmt::format("{}", v);
}

// Mean over rows and over every column whose name contains `needle`.
double column_mean(const std::string& csv, const std::string& needle) {
  std::istringstream in(csv);
  std::string line;
  if (!std::getline(in, line)) return 0;
  std::vector<std::size_t> cols;
  {
    std::istringstream h(line);
    std::string name;
    for (std::size_t i = 0; std::getline(h, name, ','); ++i)
      if (name.find(needle) != std::string::npos) cols.push_back(i);
  }
  if (cols.empty()) return 0;
  double sum = 0;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string cell;
    std::size_t c = 0, k = 0;
    for (std::size_t i = 0; std::getline(row, cell, ','); ++i) {
      if (k < cols.size() && cols[k] == i) {
        ++k;
        if (!cell.empty()) {
          sum += std::strtod(cell.c_str(), nullptr);
          ++n;
        }
      }
      c = i;
    }
    (void)c;
  }
  return n ? sum / double(n) : 0;
}

// The training config the grid starts from: an object, or a file (any
// vocabulary `rpsim train` reads) beside the sweep file; either may extend
// a base config (config_file.hpp), named relative to its own file.
nlohmann::json read_base(const nlohmann::ordered_json& j, const std::filesystem::path& file,
                         std::string& where) {
  if (!j.contains("base")) throw std::invalid_argument(where + ": base: missing (a config object or file)");
  if (j["base"].is_string()) {
    const std::filesystem::path base = file.parent_path() / j["base"].get<std::string>();
    where = base.string();
    return config::read_config_tree(base);
  }
  if (!j["base"].is_object())
    throw std::invalid_argument(where + ": base: expected an object or a file name");
  where += ": base";
  return config::resolve_extends(nlohmann::json::parse(j["base"].dump()), file);
}

void read_axes(const nlohmann::ordered_json& j, const std::string& where, Sweep& s) {
  if (!j.contains("grid") || !j["grid"].is_object())
    throw std::invalid_argument(where + ": grid: expected an object of key -> [values]");
  if (j["grid"].empty())
    throw std::invalid_argument(where + ": grid is empty: give at least one key -> [values]");
  std::size_t total = 1;
  for (const auto& [key, values] : j["grid"].items()) {
    if (!values.is_array() || values.empty())
      throw std::invalid_argument(
          fmt::format("{}: grid.{}: expected a non-empty array of values", where, key));
    Axis a{key, {}};
    for (const auto& v : values) a.values.push_back(nlohmann::json::parse(v.dump()));
    total *= a.values.size();
    if (total > 100000) throw std::invalid_argument(where + ": grid: more than 100000 runs");
    s.axes.push_back(std::move(a));
  }
}

// Run i of the grid, row-major (the last axis varies fastest); the ids are
// stable because they depend only on the grid as written. The grid's keys
// are in the base's vocabulary, as --set's are.
Run grid_run(const Sweep& s, std::size_t i, std::size_t total, const std::string& base_where) {
  Run r;
  r.index = i;
  std::size_t rest = i;
  std::vector<std::size_t> pick(s.axes.size());
  for (std::size_t a = s.axes.size(); a-- > 0;) {
    pick[a] = rest % s.axes[a].values.size();
    rest /= s.axes[a].values.size();
  }
  std::string label;
  std::vector<std::pair<std::string, nlohmann::json>> settings;
  for (std::size_t a = 0; a < s.axes.size(); ++a) {
    const nlohmann::json& v = s.axes[a].values[pick[a]];
    r.values.push_back(v);
    settings.emplace_back(s.axes[a].key, v);
    if (a) label += ',';
    label += fmt::format("{}={}", s.axes[a].key, value_text(v));
  }
  r.id = safe(fmt::format("r{:0{}}-{}", i, int(std::to_string(total - 1).size()), label));
  try {
    config::LoadedConfig loaded = config::read_config_json(s.base, base_where, settings);
    loaded.config["name"] = r.id;
    r.parsed = loaded.parse();
    r.config = std::move(loaded.config);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}: run {} ({}): {}", s.source.string(), r.id, label, e.what()));
  }
  return r;
}

}  // namespace

Sweep load(const std::filesystem::path& file) {
  const nlohmann::ordered_json j = read_json(file, "sweep");
  std::string where = file.string();
  if (!j.is_object()) throw std::invalid_argument(where + ": expected a JSON object");
  // A sweep file's keys, checked (names and types, all at once) as a
  // training config's are.
  using K = config::KeyType;
  static const config::KeySpec kKeys[] = {
      {"name", K::text, "the sweep's name: results/<name>/"},
      {"base", K::text_or_object, "the training config the grid starts from: a file or an object"},
      {"grid", K::object, "key -> [values]: one run per combination"},
      {"out", K::text, "the output folder (default results/<name>)"},
  };
  config::KeyReport report;
  config::check_keys(nlohmann::json::parse(j.dump()), kKeys, "", report);
  try {
    report.throw_if_any();
  } catch (const train::ConfigError& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  Sweep s;
  s.source = file;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
    throw std::invalid_argument(where + ": name: expected a non-empty string");
  s.name = j["name"].get<std::string>();
  if (safe(s.name) != s.name)
    throw std::invalid_argument(where + ": name: only letters, digits, - _ . allowed");
  if (j.contains("out") && !j["out"].is_string())
    throw std::invalid_argument(where + ": out: expected a folder name");
  s.out_dir = j.contains("out") ? std::filesystem::path(j["out"].get<std::string>())
                                : std::filesystem::path("results") / s.name;
  std::string base_where = where;
  s.base = read_base(j, file, base_where);
  read_axes(j, where, s);
  std::size_t total = 1;
  for (const Axis& a : s.axes) total *= a.values.size();
  for (std::size_t i = 0; i < total; ++i) s.runs.push_back(grid_run(s, i, total, base_where));
  return s;
}

std::vector<const Run*> shard(const Sweep& s, int index, int count) {
  if (count < 1 || index < 0 || index >= count)
    throw std::invalid_argument(fmt::format("shard {}/{}: expected 0 <= I < N", index, count));
  std::vector<const Run*> r;
  for (const Run& run : s.runs)
    if (int(run.index % std::size_t(count)) == index) r.push_back(&run);
  return r;
}

bool run_complete(const Sweep& s, const Run& r) {
  const auto dir = s.out_dir / r.id;
  if (!std::filesystem::exists(dir / "meta.json") || !std::filesystem::exists(dir / "sweep_run.json"))
    return false;
  try {
    std::ifstream in(dir / "sweep_run.json");
    const auto j = nlohmann::json::parse(in);
    return j.at("config") == r.config;
  } catch (const std::exception&) {
    return false;  // unreadable or half-written by an older version: run again
  }
}

std::size_t execute(const Sweep& s, const std::vector<const Run*>& runs, int parallel, std::FILE* log) {
  io::ensure_writable_dir(s.out_dir);
  std::vector<const Run*> todo;
  for (const Run* r : runs) {
    if (run_complete(s, *r)) {
      if (log) fmt::print(log, "sweep {}: {} already complete, skipped\n", s.name, r->id);
    } else {
      todo.push_back(r);
    }
  }
  std::atomic<std::size_t> next{0};
  std::mutex log_mu;
  std::exception_ptr failure;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < todo.size();) {
      if (io::interrupted().load() || failure) return;
      const Run& r = *todo[i];
      try {
        train::RunOptions opt;
        opt.out_dir = s.out_dir / r.id;
        opt.threads = 1;
        const auto t0 = std::chrono::steady_clock::now();
        const train::RunResult res = train::run(r.parsed, opt);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (res.interrupted) return;
        const double acc = res.evaluations.empty() ? -1 : res.evaluations.back().test_accuracy_percent;
        const double acc64 =
            res.evaluations.empty() ? -1 : res.evaluations.back().shadow_test_accuracy_percent;
        nlohmann::json summary = {{"steps", res.steps_done},
                                  {"skipped_steps", res.skipped_steps},
                                  {"final_loss", res.final_loss},
                                  {"final_loss_scale", res.final_loss_scale},
                                  {"test_accuracy_percent", acc},
                                  {"fp64_test_accuracy_percent", acc64},
                                  {"underflow_fraction_mean", column_mean(res.steps_csv, "underflow")},
                                  {"nonfinite_fraction_mean", column_mean(res.steps_csv, "nonfinite")},
                                  {"weight_rel_distance_mean", column_mean(res.steps_csv, "dist")},
                                  {"synthetic_data", res.synthetic_data}};
        nlohmann::json record = {{"id", r.id},
                                 {"index", r.index},
                                 {"config", r.config},
                                 {"summary", summary},
                                 {"wall_time_s", wall}};
        io::write_atomic(opt.out_dir / "sweep_run.json", record.dump(2) + "\n");
        if (log) {
          std::lock_guard<std::mutex> lock(log_mu);
          fmt::print(log, "sweep {}: {} done in {:.1f} s (accuracy {:.2f}%, fp64 {:.2f}%)\n", s.name, r.id,
                     wall, acc, acc64);
          std::fflush(log);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(log_mu);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  const int n = std::max(1, std::min<int>(parallel, int(todo.size())));
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  return todo.size();
}

// The columns of each run's results after the grid's keys. One that a grid
// key also names (a grid over "steps") is written result.<name>: the header
// was run_id,seed,steps,steps,... and pandas read the second as "steps.1".
constexpr const char* kResultColumns[] = {"steps",
                                          "skipped_steps",
                                          "final_loss",
                                          "final_loss_scale",
                                          "test_accuracy_percent",
                                          "fp64_test_accuracy_percent",
                                          "accuracy_gap_to_fp64_points",
                                          "underflow_fraction_mean",
                                          "nonfinite_fraction_mean",
                                          "weight_rel_distance_mean",
                                          "synthetic_data",
                                          "wall_time_s"};

std::string merge(const Sweep& s) {
  std::string csv = "run_id";
  for (const Axis& a : s.axes) csv += fmt::format(",{}", csv_field(a.key));
  for (const std::string name : kResultColumns) {
    const bool taken =
        std::any_of(s.axes.begin(), s.axes.end(), [&](const Axis& a) { return a.key == name; });
    csv += fmt::format(",{}{}", taken ? "result." : "", name);
  }
  csv += "\n";
  for (const Run& r : s.runs) {
    const auto file = s.out_dir / r.id / "sweep_run.json";
    if (!run_complete(s, r))
      throw std::invalid_argument(fmt::format("sweep {}: run {} has no complete results in '{}'", s.name,
                                              r.id, (s.out_dir / r.id).string()));
    std::ifstream in(file);
    const auto j = nlohmann::json::parse(in);
    const auto& m = j.at("summary");
    csv += csv_field(r.id);
    for (const auto& v : r.values) csv += fmt::format(",{}", csv_field(value_text(v)));
    const double acc = m.at("test_accuracy_percent"), acc64 = m.at("fp64_test_accuracy_percent");
    csv += fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{}\n", m.at("steps").get<std::int64_t>(),
                       m.at("skipped_steps").get<std::int64_t>(), number(m.at("final_loss")),
                       number(m.at("final_loss_scale")), number(acc), number(acc64),
                       acc64 < 0 ? std::string("") : number(acc64 - acc),
                       number(m.at("underflow_fraction_mean")), number(m.at("nonfinite_fraction_mean")),
                       number(m.at("weight_rel_distance_mean")), m.at("synthetic_data").get<bool>() ? 1 : 0,
                       fmt::format("{:.3f}", j.at("wall_time_s").get<double>()));
  }
  io::write_atomic(s.out_dir / "summary.csv", csv);
  return csv;
}

}  // namespace rpsim::sim::sweep
