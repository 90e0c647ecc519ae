// A config file as JSON, with "extends" resolved: the one way studies,
// sweeps, `rpsim train` and the Python module read a config file.
//
// "extends": FILE (relative to the extending file's folder) names a base
// config; the extending file is applied to it as a JSON merge patch (RFC
// 7386: objects merge key by key, a null removes the key, anything else
// replaces it), so a variant names only what it changes. A base may extend
// another, up to 8 deep.
//
//   nlohmann::json j = config::read_config_tree("experiments/configs/study-fixed-point-paper.json");
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace rpsim::sim::config {

// The file's JSON. ConfigError "FILE: why": a folder, a file that cannot be
// read, not JSON.
nlohmann::json read_json_file(const std::filesystem::path& file);

// `j` (read from `file`; "" for JSON from no file, whose bases are named
// relative to the working folder) with its "extends" chain merged in.
// ConfigError naming the file and "extends": not a file name, a base that
// cannot be read, a chain more than 8 deep (a loop).
nlohmann::json resolve_extends(nlohmann::json j, const std::filesystem::path& file);

// read_json_file, then resolve_extends.
nlohmann::json read_config_tree(const std::filesystem::path& file);

}  // namespace rpsim::sim::config
