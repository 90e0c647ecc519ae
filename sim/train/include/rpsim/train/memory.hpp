// Bytes a training run holds per tensor class under a precision policy:
// what the formats in the policy cost, not what a framework's allocator adds.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "rpsim/formats/format.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {

// elements * bits / 8, rounded up to whole bytes.
std::uint64_t tensor_bytes(std::uint64_t elements, const Format& fmt);

struct MemoryReport {
  std::uint64_t weights = 0;          // the copies the ops read (autocast: low-precision copies)
  std::uint64_t master_weights = 0;   // binary32 masters of mixed precision; 0 without
  std::uint64_t activations = 0;      // tensors saved for backward, one batch
  std::uint64_t gradients = 0;        // weight gradients in the gradient format
  std::uint64_t optimizer_state = 0;  // momentum / Adam moments / Kahan buffer
  std::uint64_t total() const { return weights + master_weights + activations + gradients + optimizer_state; }
  nlohmann::json to_json() const;
};

// For `parameters` weights, `state_buffers` optimizer buffers per weight and
// `activation_bytes` of saved activations (measured on the model).
MemoryReport memory_for(std::uint64_t parameters, const PrecisionPolicy& policy, int state_buffers,
                        std::uint64_t activation_bytes);

}  // namespace rpsim::sim::train
