// The inner loop of the Tensor Core model on pre-decoded operands
// (tensor_core_chain.hpp runs it for every caller): the shared per-step
// arithmetic of tensor_core_step.hpp, which the CUDA backend compiles too.
// Internal to sim/.
#pragma once

#include "rpsim/accumulation/tensor_core_step.hpp"
