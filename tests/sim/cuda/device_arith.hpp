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
#include "rpsim/formats/recipe_arith_scales.hpp"
#include "rpsim/formats/recipe_block.hpp"
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

// recipe_arith_scales.hpp: the recipes' scale rules and element encodings
std::uint8_t e8m0_from_f32(float v, recipe::E8m0Cast cast);
std::uint8_t mx_scale_code(float amax, recipe::MxScaleRule rule, recipe::ElementKind k);
std::uint8_t mx_element(float x, std::uint8_t scale_code, recipe::MxScaleRule rule, recipe::ElementKind k);
recipe::Nvfp4TensorScale nvfp4_tensor_scale(float amax, float e4m3_max);
float nvfp4_scale_argument(float vec_max, float ges, recipe::Nvfp4Formula f);
float nvfp4_encode_scale(float scale, float gds);
std::uint8_t nvfp4_element(float x, float enc);
std::uint8_t nvfp4_4over6_scale(float vec_max, float ges, bool map4);
float nvfp4_4over6_term(float q, std::uint8_t scale_code, float amax, float e4m3_max, float x, float ges,
                        bool fast, bool mse);
recipe::Fp8Scale te_fp8_scale(float amax, float max, bool pow2);
std::uint8_t fp8_element(float x, float scale, recipe::ElementKind k, bool clamp);
float element_value(recipe::ElementKind k, std::uint8_t code);

// recipe_block.hpp: every block of every group of x (g.rows x g.cols,
// row-major) through quantize_group_block, as the CUDA backend's block
// quantiser runs it: each entry's code and its block's decode and encode
// scales and scale code, row-major.
void quantize_operand(const QuantSpec& spec, const recipe::OperandGroups& g,
                      const recipe::Nvfp4TensorScale& ts, const recipe::StochasticElements* sr,
                      const float* x, std::uint8_t* codes, recipe::BlockScale* scales);

}  // namespace rpsim::device_arith
