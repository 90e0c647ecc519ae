// The extension module rpsim._core; the package rpsim (rpsim/__init__.py)
// re-exports it and adds the parts written in Python. Errors become Python
// exceptions: bad formats, roundings, keys and values ValueError (the core's
// std::invalid_argument family: FormatError, ConfigError, GoldenDataError),
// file problems OSError, an interrupt KeyboardInterrupt.
#include "bindings.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/io/results_io.hpp"

PYBIND11_MODULE(_core, m) {
  namespace python = rpsim::python;
  m.doc() = "rpsim: bit-exact reduced-precision arithmetic (the C++ core of the rpsim package)";
  python::bind_formats(m);
  python::bind_descriptors(m);
  python::bind_accumulation(m);
  python::bind_validation(m);
  python::bind_manifest(m);
  python::bind_scaling(m);
  python::bind_train(m);
  python::bind_bench(m);
  python::bind_blockscale(m);
  python::bind_recipes(m);
  python::bind_torch(m);
  python::bind_torch_train(m);
  python::bind_torch_block(m);
  python::bind_op_core(m);
  python::bind_conv_op(m);
  python::bind_step_ops(m);
  python::bind_optimizer(m);
  python::bind_cuda(m);
  m.def("keep_freed_memory", &rpsim::io::keep_freed_memory,
        "glibc's malloc keeps freed memory instead of giving it back to the kernel, as the rpsim binary "
        "sets it (rpsim/io/process.hpp): a training loop frees and allocates tensors of the same sizes every "
        "step, and faulting them in again page by page took about half of an emulated conv GEMM's backward. "
        "Called by rpsim.torch.Trainer and rpsim.train; call it once for a loop of your own over "
        "rpsim.torch.emulate. The peak reached stays mapped until the process exits.");
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const rpsim::io::IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const rpsim::io::Interrupted& e) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    }
  });
}
