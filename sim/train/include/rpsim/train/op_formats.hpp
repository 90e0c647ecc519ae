// The formats of an op's results from its inputs' formats, as PyTorch
// decides them: type promotion and the arithmetic of elementwise kernels
// (opmath). One rule for rpsim train's layers and rpsim.torch's dispatch
// (exported as rpsim._core._promote_formats).
#pragma once

#include "rpsim/formats/format.hpp"

namespace rpsim::sim::train {

// PyTorch's type promotion of two floating formats: the one that holds the
// other, else binary32 (float16 + bfloat16 -> float32), else binary64.
inline const Format& promote(const Format& a, const Format& b) {
  if (a == b) return a;
  if (a.precision() >= b.precision() && a.emax >= b.emax) return a;
  if (b.precision() >= a.precision() && b.emax >= a.emax) return b;
  return a.bits <= 32 && b.bits <= 32 ? formats::binary32() : formats::binary64();
}

// The arithmetic an elementwise CUDA kernel runs in (PyTorch's opmath_t):
// binary32 for narrower formats, else the format itself.
inline const Format& opmath(const Format& f) {
  return f.bits < 32 ? formats::binary32() : f;
}

}  // namespace rpsim::sim::train
