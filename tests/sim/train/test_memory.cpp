// Memory accounting arithmetic per precision policy.
#include <catch2/catch.hpp>

#include "rpsim/train/memory.hpp"

using namespace rpsim;
using namespace rpsim::sim::train;

TEST_CASE("train: tensor bytes per format", "[train]") {
  // 42M elements: 168 MB in binary32, 84 MB in binary16, 42 MB in FP8.
  CHECK(tensor_bytes(42'000'000, formats::binary32()) == 168'000'000);
  CHECK(tensor_bytes(42'000'000, formats::binary16()) == 84'000'000);
  CHECK(tensor_bytes(42'000'000, formats::e4m3()) == 42'000'000);
  CHECK(tensor_bytes(3, format("e2m1")) == 2);  // 12 bits round up to 2 bytes
}

TEST_CASE("train: ResNet-50-size memory under fp32 and fp16-amp", "[train]") {
  const std::uint64_t params = 25'500'000;
  const MemoryReport fp32 = memory_for(params, named_policy("fp32"), 1, 0);  // SGD with momentum
  CHECK(fp32.weights == 102'000'000);
  CHECK(fp32.master_weights == 0);
  CHECK(fp32.gradients == 102'000'000);
  CHECK(fp32.optimizer_state == 102'000'000);
  const MemoryReport amp = memory_for(params, named_policy("fp16-amp"), 2, 1000);  // Adam
  CHECK(amp.weights == 51'000'000);                                                // fp16 copies the ops read
  CHECK(amp.master_weights == 102'000'000);                                        // fp32 masters
  CHECK(amp.gradients == 102'000'000);
  CHECK(amp.optimizer_state == 204'000'000);
  CHECK(amp.activations == 1000);
  CHECK(amp.total() == 51'000'000 + 102'000'000 + 102'000'000 + 204'000'000 + 1000);
  const MemoryReport pure = memory_for(params, named_policy("bf16-kahan"), 1, 0);
  CHECK(pure.weights == 51'000'000);
  CHECK(pure.master_weights == 0);
  CHECK(pure.optimizer_state == 51'000'000);
}
