// The smallest training config the config-layer tests parse: an MLP on 64
// synthetic samples under `policy`.
#pragma once

#include <nlohmann/json.hpp>

namespace rpsim::test {

inline nlohmann::json small_config(const nlohmann::json& policy) {
  return {{"policy", policy},
          {"model", {{"type", "mlp"}, {"hidden", {16}}}},
          {"data", {{"name", "synthetic"}, {"synthetic_train_size", 64}, {"synthetic_test_size", 16}}},
          {"batch_size", 16},
          {"steps", 4}};
}

}  // namespace rpsim::test
