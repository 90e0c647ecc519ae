// rpsim._core's door to the CUDA backend (sim/cuda/include/rpsim/cuda/backend.h):
// device arrays as integers (a torch tensor's data_ptr(), the current
// stream's cuda_stream), so neither side is compiled against the other's
// C++ ABI. Built without a CUDA compiler, _cuda_built() is False and every
// other function raises RuntimeError saying so. Errors: bad arguments
// ValueError, a model the device does not run NotImplementedError, no device
// or a CUDA failure RuntimeError, each with the backend's message.
#include <string>

#include "bindings.hpp"

#if defined(RPSIM_HAVE_CUDA_BACKEND)
#include "rpsim/cuda/backend.h"
#endif

namespace rpsim::python {

namespace {

#if defined(RPSIM_HAVE_CUDA_BACKEND)

int dtype_code(const std::string& name) {
  if (name == "f64" || name == "float64") return RPSIM_CUDA_F64;
  if (name == "f32" || name == "float32") return RPSIM_CUDA_F32;
  if (name == "u8" || name == "uint8") return RPSIM_CUDA_U8;
  if (name == "u16" || name == "uint16") return RPSIM_CUDA_U16;
  if (name == "u32" || name == "uint32") return RPSIM_CUDA_U32;
  if (name == "u64" || name == "uint64") return RPSIM_CUDA_U64;
  throw py::value_error("dtype '" + name + "' is not float64, float32, uint8, uint16, uint32 or uint64");
}

void raise(int code, const rpsim_cuda_error& err) {
  switch (code) {
    case RPSIM_CUDA_OK: return;
    case RPSIM_CUDA_BAD_ARGUMENT: throw py::value_error(err.message);
    case RPSIM_CUDA_UNSUPPORTED:
      PyErr_SetString(PyExc_NotImplementedError, err.message);
      throw py::error_already_set();
    default: throw std::runtime_error(err.message);
  }
}

void* pointer(std::uintptr_t p) {
  return reinterpret_cast<void*>(p);
}

// (data_ptr, dtype, rows, cols, row_stride, col_stride) -> a matrix; None -> no data.
rpsim_cuda_matrix matrix(const py::object& t) {
  rpsim_cuda_matrix m{RPSIM_CUDA_F64, nullptr, 0, 0, 0, 0};
  if (t.is_none()) return m;
  const auto v = t.cast<py::tuple>();
  if (v.size() != 6)
    throw py::value_error("a matrix is (data_ptr, dtype, rows, cols, row_stride, col_stride)");
  m.data = pointer(v[0].cast<std::uintptr_t>());
  m.dtype = dtype_code(v[1].cast<std::string>());
  m.rows = v[2].cast<std::int64_t>();
  m.cols = v[3].cast<std::int64_t>();
  m.row_stride = v[4].cast<std::int64_t>();
  m.col_stride = v[5].cast<std::int64_t>();
  return m;
}

void bind_block_quantize(py::module_& m) {
  m.def(
      "_cuda_block_quantize",
      [](const std::string& recipe, const std::string& options, const py::object& x, float tensor_amax,
         const py::object& values, const py::object& scales, std::uintptr_t codes, std::uintptr_t stream,
         const std::string& rounding, std::uint64_t seed, std::uint64_t stream_id) {
        const rpsim_cuda_matrix mx = matrix(x), mv = matrix(values), ms = matrix(scales);
        const rpsim_cuda_rounding r{rounding.c_str(), "", "", 0, 0, 0, seed, stream_id, 0};
        rpsim_cuda_error err{};
        double ges = 1;
        int code;
        {
          py::gil_scoped_release released;
          code = rpsim_cuda_block_quantize(recipe.c_str(), options.c_str(), &mx, tensor_amax, &r, &mv, &ms,
                                           static_cast<std::uint8_t*>(pointer(codes)), &ges, pointer(stream),
                                           &err);
        }
        raise(code, err);
        return ges;
      },
      "The operand's block quantisation on the device (backend.h rpsim_cuda_block_quantize); returns NVFP4's "
      "global encode scale (1 otherwise).",
      py::arg("recipe"), py::arg("options"), py::arg("x"), py::arg("tensor_amax") = 0.0f,
      py::arg("values") = py::none(), py::arg("scales") = py::none(), py::arg("codes_ptr") = 0,
      py::arg("stream") = 0, py::arg("rounding") = "rne", py::arg("seed") = 0, py::arg("stream_id") = 0);
}

void bind_backend(py::module_& m) {
  m.def("_cuda_built", [] { return true; });
  m.def("_cuda_architectures", [] { return std::string(rpsim_cuda_architectures()); });
  m.def("_cuda_device_count", [] {
    int count = 0;
    return rpsim_cuda_device_count(&count, nullptr) == RPSIM_CUDA_OK ? count : 0;
  });
  m.def(
      "_cuda_round",
      [](const std::string& format, std::uintptr_t in, const std::string& in_dtype, std::uintptr_t out,
         const std::string& out_dtype, std::size_t n, std::uintptr_t stream, const std::string& rounding,
         std::uint64_t seed, std::uint64_t stream_id, std::uint64_t first_index, bool ftz, bool daz,
         const std::string& overflow, const std::string& nan_policy, int stochastic_bits) {
        rpsim_cuda_rounding r{
            rounding.c_str(), overflow.c_str(), nan_policy.c_str(), daz, ftz, stochastic_bits, seed,
            stream_id,        first_index};
        rpsim_cuda_error err{};
        const int in_code = dtype_code(in_dtype), out_code = dtype_code(out_dtype);
        int code;
        {
          py::gil_scoped_release released;
          code = rpsim_cuda_round(format.c_str(), &r, in_code, pointer(in), out_code, pointer(out), n,
                                  pointer(stream), &err);
        }
        raise(code, err);
      },
      py::arg("format"), py::arg("in_ptr"), py::arg("in_dtype"), py::arg("out_ptr"), py::arg("out_dtype"),
      py::arg("n"), py::arg("stream") = 0, py::arg("rounding") = "rne", py::arg("seed") = 0,
      py::arg("stream_id") = 0, py::arg("first_index") = 0, py::arg("ftz") = false, py::arg("daz") = false,
      py::arg("overflow") = "", py::arg("nan_policy") = "", py::arg("stochastic_bits") = 0);
  m.def(
      "_cuda_amax",
      [](std::uintptr_t in, const std::string& dtype, std::size_t n, std::uintptr_t out,
         std::uintptr_t stream) {
        rpsim_cuda_error err{};
        raise(rpsim_cuda_amax(dtype_code(dtype), pointer(in), n, static_cast<double*>(pointer(out)),
                              pointer(stream), &err),
              err);
      },
      py::arg("in_ptr"), py::arg("dtype"), py::arg("n"), py::arg("out_ptr"), py::arg("stream") = 0);
  m.def(
      "_cuda_fp8_quantize",
      [](const std::string& format, double scale, std::uintptr_t in, const std::string& in_dtype,
         std::uintptr_t out, const std::string& out_dtype, std::size_t n, std::uintptr_t stream) {
        rpsim_cuda_error err{};
        raise(rpsim_cuda_fp8_quantize(format.c_str(), scale, dtype_code(in_dtype), pointer(in),
                                      dtype_code(out_dtype), pointer(out), n, pointer(stream), &err),
              err);
      },
      py::arg("format"), py::arg("scale"), py::arg("in_ptr"), py::arg("in_dtype"), py::arg("out_ptr"),
      py::arg("out_dtype"), py::arg("n"), py::arg("stream") = 0);
  m.def(
      "_cuda_gemm",
      [](const std::string& model, const py::object& a, const py::object& b, const py::object& c,
         const py::object& d, std::uintptr_t stream, const py::object& sfa, const py::object& sfb,
         const py::object& scale_a, const py::object& scale_b) {
        const rpsim_cuda_matrix ma = matrix(a), mb = matrix(b), mc = matrix(c), md = matrix(d);
        const rpsim_cuda_gemm_scales s{matrix(sfa), matrix(sfb), matrix(scale_a), matrix(scale_b)};
        rpsim_cuda_error err{};
        int code;
        {
          py::gil_scoped_release released;
          code = rpsim_cuda_gemm(model.c_str(), &ma, &mb, &mc, &md, &s, pointer(stream), &err);
        }
        raise(code, err);
      },
      py::arg("model"), py::arg("a"), py::arg("b"), py::arg("c"), py::arg("d"), py::arg("stream") = 0,
      py::arg("sfa") = py::none(), py::arg("sfb") = py::none(), py::arg("scale_a") = py::none(),
      py::arg("scale_b") = py::none());
  bind_block_quantize(m);
}

#else

void bind_backend(py::module_& m) {
  m.def("_cuda_built", [] { return false; });
  m.def("_cuda_device_count", [] { return 0; });
  for (const char* name : {"_cuda_architectures", "_cuda_round", "_cuda_amax", "_cuda_fp8_quantize",
                           "_cuda_gemm", "_cuda_block_quantize"})
    m.def(name, [name](const py::args&, const py::kwargs&) -> py::object {
      throw std::runtime_error(std::string("rpsim.") + name +
                               ": rpsim was built without a CUDA compiler (configure with nvcc on PATH or at "
                               "/usr/local/cuda, -DRPSIM_CUDA=ON)");
    });
}

#endif

}  // namespace

void bind_cuda(py::module_& m) {
  bind_backend(m);
}

}  // namespace rpsim::python
