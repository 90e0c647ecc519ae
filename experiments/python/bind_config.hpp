// Configs and policies from Python values, shared by rpsim._train,
// rpsim.torch's kernels and its config set-up: one path from a dict, a path or
// a policy name to the typed values the config parser gives `rpsim train`.
#pragma once

#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/config/config_loader.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::python {

namespace py = pybind11;

// A JSON-able Python value (dict, list, str, number) as nlohmann JSON,
// through Python's json module.
nlohmann::json json_arg(const py::object& value);

// A config dict or a path to a config file (any vocabulary the loader reads),
// with --set-style overrides. A TypeError for anything else.
sim::config::LoadedConfig config_arg(const py::object& config, const std::vector<std::string>& overrides);

// A policy name or a config's policy object, through the config parser
// (ConfigError names the key).
sim::train::PrecisionPolicy policy_arg(const py::object& spec);

}  // namespace rpsim::python
