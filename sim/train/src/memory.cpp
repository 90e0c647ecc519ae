// Memory accounting per precision policy.
#include "rpsim/train/memory.hpp"

namespace rpsim::sim::train {

std::uint64_t tensor_bytes(std::uint64_t elements, const Format& fmt) {
  return (elements * std::uint64_t(fmt.bits) + 7) / 8;
}

MemoryReport memory_for(std::uint64_t parameters, const PrecisionPolicy& policy, int state_buffers,
                        std::uint64_t activation_bytes) {
  MemoryReport r;
  r.weights = tensor_bytes(parameters, *policy.weights);
  if (policy.master_weights) r.master_weights = tensor_bytes(parameters, *policy.master_weights);
  r.gradients = tensor_bytes(parameters, *policy.gradients);
  r.optimizer_state = std::uint64_t(state_buffers) * tensor_bytes(parameters, *policy.optimizer_state);
  r.activations = activation_bytes;
  return r;
}

nlohmann::json MemoryReport::to_json() const {
  return {{"weights_bytes", weights},
          {"master_weights_bytes", master_weights},
          {"activations_bytes", activations},
          {"gradients_bytes", gradients},
          {"optimizer_state_bytes", optimizer_state},
          {"total_bytes", total()}};
}

}  // namespace rpsim::sim::train
