// The CUDA backend's host plumbing (backend.h): argument errors as
// exceptions turned into status codes at the C boundary, the device lookup,
// and names parsed into the shared code's plain structs. Plain C++ over the
// CUDA runtime's C API. Internal to sim/cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend_launch.hpp"
#include "rpsim/cuda/backend.h"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/scalar_core.hpp"

namespace rpsim::cuda::backend {

// A failed call: its status code and message.
class Failure : public std::runtime_error {
 public:
  Failure(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

[[noreturn]] void bad_argument(const std::string& function, const std::string& why);
[[noreturn]] void unsupported(const std::string& function, const std::string& why);

// Throws RPSIM_CUDA_NO_DEVICE when the runtime finds no device.
void require_device(const char* function);
// Throws RPSIM_CUDA_CUDA_ERROR naming `what` when e (a cudaError_t) is not success.
void check_cuda(int e, const char* what);

// Runs `body` and turns what it throws into the C status (and err's message).
int finish_call(rpsim_cuda_error* err, int code, const std::string& message);
template <class F>
int guarded(rpsim_cuda_error* err, F&& body) {
  try {
    body();
  } catch (const Failure& f) {
    return finish_call(err, f.code(), f.what());
  } catch (const std::exception& e) {
    // rpsim's own parsers (formats, accumulation specs) throw
    // std::invalid_argument naming the token.
    return finish_call(err, RPSIM_CUDA_BAD_ARGUMENT, e.what());
  } catch (...) {
    return finish_call(err, RPSIM_CUDA_BAD_ARGUMENT, "unknown error");
  }
  return finish_call(err, RPSIM_CUDA_OK, "");
}

const char* dtype_name(int dtype);
int dtype_bits(int dtype);  // 0: not a dtype
void require_value_dtype(const char* function, const std::string& what, int dtype);

// Every value of `fmt` is a binary32 value (round_values' binary32 rule).
bool fits_binary32(const Format& fmt);

Format parse_format_arg(const char* function, const char* name);

// A matrix argument as the kernels read it (strides in elements).
DMat view(const rpsim_cuda_matrix& m);
// A matrix with data (not NULL).
bool present(const rpsim_cuda_matrix* m);
// Throws naming `name` unless m is an f64 / f32 matrix of rows x cols with data.
void check_matrix(const char* function, const char* name, const rpsim_cuda_matrix& m, std::int64_t rows,
                  std::int64_t cols);
RoundingDesc parse_rounding_arg(const char* function, const rpsim_cuda_rounding* r);

}  // namespace rpsim::cuda::backend
