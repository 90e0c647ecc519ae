// Sweeps: a grid over any training-config keys expanded into runs with
// stable ids, run locally, by MPI ranks or as Slurm array shards, and merged
// into one summary.csv that is byte-identical whichever way it ran (its only
// non-deterministic column, wall_time_s, comes last).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/train/run_config.hpp"

namespace rpsim::sim::sweep {

struct Axis {
  std::string key;  // a config key path, e.g. "policy" or "loss_scaler.init_scale"
  std::vector<nlohmann::json> values;
};

struct Run {
  std::size_t index = 0;               // position in the grid (row-major over axes)
  std::string id;                      // "r003-policy=fp16-amp,seed=1" made filesystem-safe
  std::vector<nlohmann::json> values;  // one per axis
  nlohmann::json config;               // the base with the values applied, in rpsim's vocabulary
  // `config` as parsed once, when the sweep was read: what the run, its
  // plan and its estimate use (no run parses its config again).
  train::Config parsed;
};

struct Sweep {
  std::string name;
  std::filesystem::path source;   // the sweep file
  std::filesystem::path out_dir;  // results/<name> unless the file or --out says otherwise
  nlohmann::json base;            // the training config the grid starts from, as written
  std::vector<Axis> axes;
  std::vector<Run> runs;
};

// Reads SWEEP.json: {"name": ..., "base": {config} | "path/to/config.json",
// "grid": {"key": [v1, v2], ...}, "out": "dir"?}. The base is read as
// `rpsim train` reads a config (config/config_loader.hpp: rpsim's vocabulary
// or DeepSpeed's, Keras names, grad_scaler, fp8_recipe), the grid's keys in
// the base's vocabulary. Every run's config is parsed before any work;
// errors name the file, the grid key and the run. Throws std::invalid_argument.
Sweep load(const std::filesystem::path& file);

// Which runs a worker takes: shard i of n takes runs with index % n == i.
std::vector<const Run*> shard(const Sweep& s, int index, int count);

// Runs each of `runs` (skipping those already complete: meta.json present and
// its "config" equal to the run's), writing out_dir/<run-id>/. `parallel`
// runs at once, each single-threaded. Returns the number actually run.
std::size_t execute(const Sweep& s, const std::vector<const Run*>& runs, int parallel, std::FILE* log);

// Builds out_dir/summary.csv from the runs' meta.json and steps.csv; throws
// naming the first run whose results are missing.
std::string merge(const Sweep& s);

bool run_complete(const Sweep& s, const Run& r);

}  // namespace rpsim::sim::sweep
