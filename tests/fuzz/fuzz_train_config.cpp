// The training config parser (sim/train/trainer.hpp: parse_config,
// apply_override; DeepSpeed / Keras / GradScaler translations behind it) must
// reject any bad config with ConfigError — which `rpsim train` turns into an
// exit status 2 naming the key — and never crash or let another exception
// through (a nlohmann type_error would surface as "internal error", exit 3).
//
// Input: an optional first line `key=value` (a --set override; empty line for
// none), then the JSON text.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "rpsim/config/config.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/trainer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = all.find('\n');
  const std::string override_text(newline == std::string_view::npos ? std::string_view{}
                                                                    : all.substr(0, newline));
  const std::string_view json_text = newline == std::string_view::npos ? all : all.substr(newline + 1);
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // not JSON: `rpsim train` reports the parse error itself
  try {
    if (!override_text.empty()) rpsim::sim::config::apply_override(j, override_text);
    (void)rpsim::sim::config::parse_config(j);
  } catch (const rpsim::sim::train::ConfigError&) {
  }
  return 0;
}
