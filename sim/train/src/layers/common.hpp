// Internal to the layers: how an op's rule resolves to formats, FP8 tests,
// the stochastic-rounding key of a matmul, the GEMM epilogue's dequantisation.
#pragma once

#include <string>

#include "rpsim/formats/random.hpp"
#include "rpsim/train/layers.hpp"
#include "rpsim/train/op_formats.hpp"

namespace rpsim::sim::train::detail {

struct Formats {
  const Format* compute;
  const Format* output;
  const Format* backward;
};

inline Formats resolve(const OpRule& r, const Format& input) {
  if (r.follow_inputs) return {&input, &input, &input};
  return {r.compute, r.output, r.backward_compute ? r.backward_compute : r.compute};
}

inline const Format& f32() {
  return formats::binary32();
}

inline bool per_tensor_fp8(const OpRule& r, const PrecisionPolicy& p) {
  return r.scaled_inputs && (p.fp8.scaling == Fp8Scaling::delayed || p.fp8.scaling == Fp8Scaling::current);
}
inline bool block_fp8(const OpRule& r, const PrecisionPolicy& p) {
  return r.scaled_inputs && block_scaled(p.fp8.scaling);
}

// The stochastic-rounding key of one matmul of one layer at one step
// (`which`: 0 forward, 1 weight gradient, 2 input gradient). Only models
// that round stochastically read it.
inline RandomStream matmul_stream(const std::string& layer, const StepContext& ctx, std::uint64_t which) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the layer name
  for (const unsigned char ch : layer) h = (h ^ ch) * 0x100000001b3ull;
  return RandomStream{ctx.seed, mix64(h ^ mix64(ctx.step)) + which};
}

// acc * (1 / (sa * sb)) in binary32, then in the accumulation format: the
// GEMM epilogue's dequantisation.
inline void dequantize(Matrix& acc, double sa, double sb, const Format& acc_format) {
  const double inv = round_value(f32(), 1.0 / (sa * sb));
  if (inv == 1.0) return;
  acc *= inv;
  round_in_place(acc_format, acc);
}

}  // namespace rpsim::sim::train::detail

namespace rpsim::sim::train::detail {

using train::opmath;
using train::promote;

// a + b as an elementwise kernel on values of `f`: in opmath, rounded to f
// (always to nearest, whatever the tensor rounding). The binary64 sum of two
// values of f rounded twice, as two array roundings.
inline Matrix add_rounded(const Matrix& a, const Matrix& b, const Format& f) {
  Matrix y = a + b;
  round_in_place(opmath(f), y, RoundingMode::nearest_even);
  round_in_place(f, y, RoundingMode::nearest_even);
  return y;
}

}  // namespace rpsim::sim::train::detail
