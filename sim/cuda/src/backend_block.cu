// Block quantisation of a GEMM operand on the device (backend.h
// rpsim_cuda_block_quantize): each block is recipe_block.hpp's
// quantize_group_block, the code the CPU trainer runs (block_operand.cpp); the
// kernel adds only the thread-to-block indexing and the stores.
#include "backend_device.cuh"

namespace rpsim::cuda::backend {
namespace {

__global__ void block_quantize_kernel(BlockQuantizeArgs a) {
  const std::size_t gc = recipe::group_cols(a.groups), nb = recipe::group_blocks(a.groups);
  const std::size_t total = recipe::group_rows(a.groups) * gc * nb;
  const std::size_t step = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t t = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += step) {
    const std::size_t j = t % nb, gj = (t / nb) % gc, gi = t / nb / gc;
    recipe::quantize_group_block(
        a.spec, a.groups, gi, gj, j, a.tensor, a.stochastic ? &a.sr : nullptr,
        [&](std::size_t r, std::size_t c) { return float(at(a.x, std::int64_t(r), std::int64_t(c))); },
        [&](std::size_t r, std::size_t c, std::uint8_t code, const recipe::BlockScale& b) {
          const auto i = std::int64_t(r), k = std::int64_t(c);
          // The element times its block's scale, as the trainer's operand
          // holds it (exact in binary64; the host refuses an f32 output that
          // would round it).
          if (a.values.data)
            put(a.values, i, k, double(recipe::element_value(a.spec.element, code)) * double(b.decode));
          if (a.scales.data) put(a.scales, i, k, double(b.decode));
          if (a.codes) a.codes[r * a.groups.cols + c] = code;
        });
  }
}

}  // namespace

void launch_block_quantize(const BlockQuantizeArgs& a, void* stream) {
  const std::size_t n =
      recipe::group_rows(a.groups) * recipe::group_cols(a.groups) * recipe::group_blocks(a.groups);
  if (n == 0) return;
  block_quantize_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(a);
  check_launch("block_quantize_kernel");
}

}  // namespace rpsim::cuda::backend
