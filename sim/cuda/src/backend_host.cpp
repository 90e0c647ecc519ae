// The CUDA backend's host plumbing (backend_host.hpp) and its entry points
// for arrays: rounding, amax, per-tensor FP8 quantisation (backend.h).
#include "backend_host.hpp"

#include <cuda_runtime.h>

#include <cstdio>

#include "backend_launch.hpp"
#include "rpsim/formats/behaviour_names.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::cuda::backend {

void bad_argument(const std::string& function, const std::string& why) {
  throw Failure(RPSIM_CUDA_BAD_ARGUMENT, function + ": " + why);
}

void unsupported(const std::string& function, const std::string& why) {
  throw Failure(RPSIM_CUDA_UNSUPPORTED,
                function + ": " + why + " (not on the CUDA backend; the CPU core runs it)");
}

void require_device(const char* function) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the runtime's error state for later calls
    throw Failure(RPSIM_CUDA_NO_DEVICE, std::string(function) + ": no CUDA device (" +
                                            (e != cudaSuccess ? cudaGetErrorString(e) : "none found") + ")");
  }
}

void check_cuda(int e, const char* what) {
  if (e != cudaSuccess)
    throw Failure(RPSIM_CUDA_CUDA_ERROR, std::string(what) + ": " + cudaGetErrorString(cudaError_t(e)));
}

int finish_call(rpsim_cuda_error* err, int code, const std::string& message) {
  if (err) {
    err->code = code;
    std::snprintf(err->message, sizeof err->message, "%s", message.c_str());
  }
  return code;
}

const char* dtype_name(int dtype) {
  switch (dtype) {
    case RPSIM_CUDA_F64: return "f64";
    case RPSIM_CUDA_F32: return "f32";
    case RPSIM_CUDA_U8: return "u8";
    case RPSIM_CUDA_U16: return "u16";
    case RPSIM_CUDA_U32: return "u32";
    case RPSIM_CUDA_U64: return "u64";
    default: return "?";
  }
}

int dtype_bits(int dtype) {
  switch (dtype) {
    case RPSIM_CUDA_F64:
    case RPSIM_CUDA_U64: return 64;
    case RPSIM_CUDA_F32:
    case RPSIM_CUDA_U32: return 32;
    case RPSIM_CUDA_U16: return 16;
    case RPSIM_CUDA_U8: return 8;
    default: return 0;
  }
}

void require_value_dtype(const char* function, const std::string& what, int dtype) {
  if (dtype != RPSIM_CUDA_F64 && dtype != RPSIM_CUDA_F32)
    bad_argument(function, what + " dtype " + std::to_string(dtype) + " is not f64 (0) or f32 (1)");
}

bool fits_binary32(const Format& fmt) {
  return fmt.man_bits <= 23 && fmt.emax <= 127 && fmt.emin - fmt.man_bits >= -149;
}

Format parse_format_arg(const char* function, const char* name) {
  if (!name) bad_argument(function, "format is NULL");
  return parse_format(name);  // FormatError names the text
}

DMat view(const rpsim_cuda_matrix& m) {
  return {m.dtype, m.data, m.row_stride, m.col_stride};
}

bool present(const rpsim_cuda_matrix* m) {
  return m && m->data;
}

void check_matrix(const char* function, const char* name, const rpsim_cuda_matrix& m, std::int64_t rows,
                  std::int64_t cols) {
  require_value_dtype(function, name, m.dtype);
  if (m.rows != rows || m.cols != cols)
    bad_argument(function, std::string(name) + " is " + std::to_string(m.rows) + "x" +
                               std::to_string(m.cols) + ", expected " + std::to_string(rows) + "x" +
                               std::to_string(cols));
  if (rows * cols > 0 && !m.data) bad_argument(function, std::string(name) + "'s data is NULL");
}

RoundingDesc parse_rounding_arg(const char* function, const rpsim_cuda_rounding* r) {
  RoundingDesc d;
  if (!r) return d;
  if (r->mode && *r->mode) d.mode = parse_rounding(r->mode);
  if (r->overflow && *r->overflow) {
    const auto o = overflow_named(r->overflow);
    if (!o) bad_argument(function, "overflow '" + std::string(r->overflow) + "' is not " + overflow_names());
    d.overflow_set = true;
    d.overflow = *o;
  }
  if (r->nan_policy && *r->nan_policy) {
    const auto p = nan_policy_named(r->nan_policy);
    if (!p)
      bad_argument(function, "nan_policy '" + std::string(r->nan_policy) + "' is not " + nan_policy_names());
    d.nan_policy = *p;
  }
  d.flush_subnormal_inputs = r->flush_subnormal_inputs != 0;
  d.flush_subnormal_outputs = r->flush_subnormal_outputs != 0;
  if (r->stochastic_bits != 0) {
    if (r->stochastic_bits < 1 || r->stochastic_bits > 64)
      bad_argument(function, "stochastic_bits " + std::to_string(r->stochastic_bits) + " outside 1..64");
    d.stochastic_bits = r->stochastic_bits;
  }
  return d;
}

}  // namespace rpsim::cuda::backend

using namespace rpsim;
using namespace rpsim::cuda::backend;

extern "C" int rpsim_cuda_device_count(int* count, rpsim_cuda_error* err) {
  return guarded(err, [&] {
    if (!count) bad_argument("rpsim_cuda_device_count", "count is NULL");
    *count = 0;
    require_device("rpsim_cuda_device_count");
    check_cuda(cudaGetDeviceCount(count), "cudaGetDeviceCount");
  });
}

extern "C" const char* rpsim_cuda_architectures(void) {
  return built_architectures();
}

extern "C" int rpsim_cuda_round(const char* format, const rpsim_cuda_rounding* rounding, int in_dtype,
                                const void* in, int out_dtype, void* out, size_t n, void* stream,
                                rpsim_cuda_error* err) {
  return guarded(err, [&] {
    const char* fn = "rpsim_cuda_round";
    const Format fmt = parse_format_arg(fn, format);
    RoundArgs a;
    a.fmt = fmt;
    a.rnd = parse_rounding_arg(fn, rounding);
    if (rounding) {
      a.seed = rounding->seed;
      a.stream_id = rounding->stream_id;
      a.first_index = rounding->first_index;
    }
    require_value_dtype(fn, "input", in_dtype);
    if (dtype_bits(out_dtype) == 0)
      bad_argument(fn, "output dtype " + std::to_string(out_dtype) + " unknown");
    if (out_dtype == RPSIM_CUDA_F32 && !fits_binary32(fmt))
      bad_argument(fn, "f32 output cannot hold every value of " + fmt.name + " (use f64)");
    if (out_dtype >= RPSIM_CUDA_U8 && dtype_bits(out_dtype) < fmt.bits)
      bad_argument(fn, std::string("output dtype ") + dtype_name(out_dtype) + " is narrower than " +
                           fmt.name + "'s " + std::to_string(fmt.bits) + " bits");
    if (n > 0 && (!in || !out)) bad_argument(fn, "in or out is NULL");
    if (in == out && in_dtype != out_dtype)
      bad_argument(fn, "in place needs the same input and output dtype");
    a.in_dtype = in_dtype;
    a.out_dtype = out_dtype;
    a.in = in;
    a.out = out;
    a.n = n;
    require_device(fn);
    if (n > 0) launch_round(a, stream);
  });
}

extern "C" int rpsim_cuda_amax(int in_dtype, const void* in, size_t n, double* amax_out, void* stream,
                               rpsim_cuda_error* err) {
  return guarded(err, [&] {
    const char* fn = "rpsim_cuda_amax";
    require_value_dtype(fn, "input", in_dtype);
    if (!amax_out || (n > 0 && !in)) bad_argument(fn, "in or amax_out is NULL");
    require_device(fn);
    launch_amax(in_dtype, in, n, amax_out, stream);
  });
}

extern "C" int rpsim_cuda_fp8_quantize(const char* format, double scale, int in_dtype, const void* in,
                                       int out_dtype, void* out, size_t n, void* stream,
                                       rpsim_cuda_error* err) {
  return guarded(err, [&] {
    const char* fn = "rpsim_cuda_fp8_quantize";
    const Format fmt = parse_format_arg(fn, format);
    require_value_dtype(fn, "input", in_dtype);
    require_value_dtype(fn, "output", out_dtype);
    if (out_dtype == RPSIM_CUDA_F32 && !fits_binary32(fmt))
      bad_argument(fn, "f32 output cannot hold every value of " + fmt.name);
    if (!(scale > 0) || !hd::is_finite(scale))
      bad_argument(fn, "scale " + std::to_string(scale) + " is not finite and positive");
    if (n > 0 && (!in || !out)) bad_argument(fn, "in or out is NULL");
    QuantizeArgs a;
    a.fmt = fmt;
    a.scale = scale;
    a.max_finite = fmt.max_finite();
    a.in_dtype = in_dtype;
    a.out_dtype = out_dtype;
    a.in = in;
    a.out = out;
    a.n = n;
    require_device(fn);
    if (n > 0) launch_fp8_quantize(a, stream);
  });
}
