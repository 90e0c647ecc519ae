// The shared per-element arithmetic (RPSIM_HD) as nvcc compiles it for the
// host: device_arith.cu is built by nvcc, so these functions run the very
// preprocessor path (__CUDACC__, __host__ __device__) the kernels take, in
// its own inline namespace (host_device.hpp), never the host compiler's copy.
// The device-arith tests compare them with the CPU core. Plain C++ here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rpsim/accumulation/accumulator_ops.hpp"
#include "rpsim/accumulation/schedule_fold.hpp"
#include "rpsim/accumulation/tensor_core_instruction.hpp"
#include "rpsim/accumulation/tensor_core_step.hpp"
#include "rpsim/formats/format_desc.hpp"
#include "rpsim/formats/scalar_core.hpp"

namespace rpsim::device_arith {

// Which compiler built device_arith.cu's copy: "nvcc" (host_device.hpp's inline namespace).
const char* compiled_by();

std::uint64_t round_binary64(const FormatDesc& fmt, double x, const RoundingDesc& r, Flags& flags);
std::uint64_t round_binary32(const FormatDesc& fmt, float x, const RoundingDesc& r, Flags& flags);
std::uint64_t widen_to_binary64(const FormatDesc& fmt, std::uint64_t bits);
std::uint64_t add_signed(const FormatDesc& fmt, std::uint64_t a, std::uint64_t b, bool negate_b,
                         const RoundingDesc& r, Flags& flags);
std::uint64_t counter_random(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// tensor_core_step.hpp / tensor_core_instruction.hpp
double tc_step(const sim::TcStep& p, int n, const double* av, const int* ae, const double* bv, const int* be,
               double c);
double tc_chain(const sim::TcStep& p, const double* a, const double* b, int k, double c);
double tc_block_scaled_chain(const sim::TcStep& p, const double* a, const double* b, int k, double c,
                             const double* sa, const double* sb);
double tc_plan_steps(const sim::TcStep& p, const sim::tc_detail::PlanView& plan, int s0, int s1,
                     const double* a, const double* b, double acc);

// accumulator_ops.hpp, schedule_fold.hpp
double sequential(const sim::AccumulatorOps& ops, const double* a, const double* b, std::size_t k, double c);
double fold_result(const sim::FoldDesc& f, double* partials, int n, double c, double sa, double sb);
double fold_add(const FormatDesc& f, RoundingMode mode, double a, double b);

}  // namespace rpsim::device_arith
