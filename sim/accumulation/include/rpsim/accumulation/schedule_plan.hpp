// A kernel schedule's chains over K as flat arrays, for executors that run
// them elsewhere (the CUDA backend's block-FMA GEMM, backend_tc.cu): the
// products of K in the order the instructions' steps take them, chunk after
// chunk (kernel_schedule.hpp steps 2 and 3; tensor_core.hpp step_interleave),
// the same plan the CPU's chains walk (tensor_core_chain.hpp ChainPlan).
#pragma once

#include <cstdint>
#include <vector>

#include "rpsim/accumulation/kernel_schedule.hpp"

namespace rpsim::sim {

struct SchedulePlan {
  // order[t]: the k of the t-th product; step s covers [begin[s], begin[s+1]);
  // first[s] / last[s]: the first / last step of an instruction (1 or 0);
  // chunk c covers steps [chunk_step[c], chunk_step[c+1]) and belongs to
  // split-K slice chunk_slice[c]. Steps of zero padding only are left out.
  std::vector<int> order, begin;
  std::vector<std::uint8_t> first, last;
  std::vector<int> chunk_step, chunk_slice;
  int steps() const { return static_cast<int>(begin.size()) - 1; }
  int chunks() const { return static_cast<int>(chunk_step.size()) - 1; }
};

// The plan of schedule s for a K-long dot product.
SchedulePlan schedule_plan(const KernelSchedule& s, int k);

}  // namespace rpsim::sim
