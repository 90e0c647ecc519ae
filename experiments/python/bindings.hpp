// What the binding files of the Python module share: NumPy input checks
// (dtype, layout, no copy when none is needed) and the rounding keywords.
// Each bind_*.cpp adds one group of functions to the module `rpsim._core`.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <string>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/tiled_copy.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim::train {
struct Fp8Stats;
}

namespace rpsim::python {

namespace py = pybind11;

void bind_formats(py::module_& m);       // round, encode, decode, round_scalar
void bind_descriptors(py::module_& m);   // formats, format_info, explain
void bind_accumulation(py::module_& m);  // gemm
void bind_validation(py::module_& m);    // gemm_check (the C++ half)
void bind_manifest(py::module_& m);      // gemm_check on a capture_gemms manifest
void bind_scaling(py::module_& m);       // scaler_trajectory
void bind_train(py::module_& m);         // train (the C++ half)
void bind_bench(py::module_& m);         // _time_round_values: the C++ array path timed in C++
void bind_blockscale(py::module_& m);    // mx_quantize, nvfp4_quantize
void bind_recipes(py::module_& m);       // quantize, recipes, recipe_check, e8m0_cast
void bind_torch(py::module_& m);         // _torch_gemm, _torch_ops, _torch_policy, _LossScaler (rpsim.torch)
void bind_torch_train(py::module_& m);   // _torch_train_setup, _TorchLoss (rpsim.torch against rpsim train)
void bind_torch_block(py::module_& m);  // _torch_block_quantize, _torch_hadamard_rows (rpsim.torch mx, nvfp4)
void bind_op_core(py::module_& m);      // _GemmOp: the op core's GEMM op (rpsim.torch's GEMMs)
void bind_conv_op(py::module_& m);      // _im2col, _col2im: the op core's convolution pieces
void bind_step_ops(py::module_& m);     // _unscale, _grad_norm, _clip_coefficient, _scale_gradients
void bind_optimizer(py::module_& m);    // _Optimizer: rpsim train's optimizer (rpsim.torch.SGD, AdamW)
void bind_cuda(py::module_& m);         // _cuda_*: the CUDA backend on device pointers (rpsim.torch.backends)

// `x` as a C-contiguous float64 or float32 NumPy array, without a copy when
// it already is one. float16 is widened to float32 (exact). A Python number
// or (nested) list is read as float64; an array (or anything with
// __array__, such as a CPU torch tensor) of another dtype raises TypeError
// naming `what` and the dtype.
py::array float_array(py::handle x, const char* what);

// MemoryError naming `what` and its size when `copy`, made by
// array_t::ensure from `from`, is null: ensure returns null, the NumPy error
// cleared, when the copy cannot be allocated, and a null array's first use
// crashed (a 200000 x 200000 strided view made rpsim.gemm segfault).
void require_copy(const py::handle& copy, const py::array& from, const char* what);

// A C-contiguous float64 array, and the row-major view of its matrices.
using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// `x` (float_array's rules) as a float64 (batch, rows, cols) array; any other
// number of dimensions raises ValueError naming `what`.
F64 batched_array(py::handle x, const char* what);

// Encodings of `fmt` as a C-contiguous array of its storage type (uint8,
// uint16, uint32 or uint64 by fmt.bits), without a copy when it already is
// one. Any integer dtype is accepted; a value that is not an encoding of
// `fmt` (negative, or bits above fmt.bits) raises ValueError; a non-integer
// dtype raises TypeError.
py::array bits_array(py::handle bits, const Format& fmt, const char* what);

// An accumulation model from a spec string or a dict (its JSON form);
// ValueError naming the model otherwise (bind_accumulation.cpp).
sim::AccumulationModel model_arg(const py::object& model);
// A 2-D array as the column-major matrix sim::gemm takes (one copy);
// `what` names it in errors.
sim::Matrix matrix_arg(py::handle x, const char* what);
// rpsim.gemm's and gemm_check's scale keywords (None or arrays; scale_a /
// scale_b also a number or a 1-D array) as sim::GemmScales (bind_accumulation.cpp).
sim::GemmScales scales_arg(const py::object& sfa, const py::object& sfb, const py::object& scale_a,
                           const py::object& scale_b);
// A matrix as a new C-contiguous float64 array.
py::array to_numpy(const sim::Matrix& m);
// copy_tiled: rpsim/accumulation/tiled_copy.hpp.
using sim::copy_tiled;

// The matrices of a (batch, rows, cols) float32 or float64 array, read where
// it lies at its strides (a view of a tensor needs no contiguous copy), as
// the core's binary64 column-major carrier; `what` names it in errors. fold:
// the batch as one matrix of batch * rows rows (torch's reshape(1, -1, cols)
// of a view that reshape would copy: conv2d's transposed im2col patches).
std::vector<sim::Matrix> matrices(const py::handle& x, const char* what, bool fold = false);
// A convolution's folded A made from its input without the (N, C*kh*kw, L)
// patches array: spec = (x, kernel, dilation, padding, stride), x a
// float32/float64 (N, C, H, W) array; one (N * L) x (C*kh*kw) matrix whose
// row n * L + l is patch l of image n (what matrices(patches^T, fold) reads),
// im2col'd straight into the carrier (bind_conv_op.cpp).
std::vector<sim::Matrix> folded_patches(const py::handle& spec);
// A 2-D C-contiguous float32 or float64 array (float_array's result) as the
// core's binary64 column-major carrier, in one tiled pass (the float64 copy
// and Eigen's transposing assignment were two).
sim::Matrix matrix_of(const py::array& a);
// Matrices of one shape as a new (batch, rows, cols) C-contiguous array:
// float32 with f32 (the nearest-even conversion torch's .to(float32) makes),
// else float64.
py::array stacked_as(const std::vector<sim::Matrix>& ms, bool f32);
// The same values as stacked_as(ms, false), without a copy where there is one
// matrix: a (1, rows, cols) float64 view of its column-major storage, which
// the array then owns (a GEMM's raw result handed to col2im, read at strides).
py::array stacked_taken(std::vector<sim::Matrix>&& ms);
// One matrix (ms of size 1; else stacked_as) as a (1, rows, cols) array over
// column-major storage: float32 with f32 (a straight, not a transposing,
// conversion), else the matrix's own storage (stacked_taken).
py::array column_major_as(std::vector<sim::Matrix>&& ms, bool f32);
// column_major_as where column_major, else stacked_as: a result in the
// layout its caller reads (a column-major B's gradient, a convolution's).
py::array stacked_in(std::vector<sim::Matrix>&& ms, bool f32, bool column_major);
// Masks of one shape as a (batch, rows, cols) bool array, C-contiguous, or
// (one mask, column_major) over column-major storage.
using Mask = Eigen::Array<bool, Eigen::Dynamic, Eigen::Dynamic>;
py::array_t<bool> stacked_mask(const std::vector<Mask>& ms, bool column_major = false);
// A quantisation's statistics (amax, scale_min, scale_max, entries,
// saturated, flushed) as a dict (bind_torch_train.cpp).
py::dict fp8_stats_dict(const sim::train::Fp8Stats& s);

// The unsigned NumPy dtype that holds one encoding of `fmt`.
py::dtype bits_dtype(const Format& fmt);

// The keyword arguments of round/encode/round_scalar as the core's Rounding:
// rounding by name (ValueError listing the names), stochastic_bits 1..64,
// ftz (subnormal results flushed), daz (subnormal inputs read as zero),
// saturate None (the format's default), True or False (overflow to infinity,
// or NaN where the format has no infinity).
Rounding make_rounding(const std::string& rounding, const py::object& stochastic_bits, bool ftz, bool daz,
                       const py::object& saturate);

// The format a user named (a table name, alias or spec string); ValueError
// naming it otherwise. The reference lives as long as the process.
const Format& format_arg(const std::string& spec);
// The same for an argument as Python passed it: None or a non-string is a
// ValueError / TypeError naming `format` (pybind's own message, "incompatible
// function arguments", named nothing).
const Format& format_arg(const py::object& spec);
// None, or the format a name or spec gives (format_arg).
inline const Format* optional_format(const py::object& spec) {
  return spec.is_none() ? nullptr : &format_arg(spec);
}

// An integer argument `name` in [0, 2^64): TypeError for a non-integer,
// ValueError naming it and the value otherwise (seed=-1 was pybind's
// "incompatible function arguments").
std::uint64_t u64_arg(const py::object& value, const char* name);

// IEEE flags by name: ["inexact", "underflow"], [] for none.
py::list flag_list(Flags flags);

// A new C-contiguous array of `dtype` shaped like `like`.
py::array empty_like(const py::array& like, const py::dtype& dtype);

// NumPy's convention for a 0-d result: the scalar.
py::object unwrap_0d(py::array a);

}  // namespace rpsim::python
