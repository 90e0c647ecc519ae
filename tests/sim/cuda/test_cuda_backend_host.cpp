// The CUDA backend's C interface (rpsim/cuda/backend.h) on a machine without
// a GPU: arguments are checked before the device is looked for, so every bad
// call names its argument; a good call returns RPSIM_CUDA_NO_DEVICE with the
// runtime's reason, never crashes; a model the device does not run says so.
#include <catch2/catch.hpp>
#include <string>

#include "rpsim/cuda/backend.h"
#include "rpsim/formats/recipe_arith_scales.hpp"
#include "shared_data.hpp"

namespace {

bool device_present() {
  int count = 0;
  return rpsim_cuda_device_count(&count, nullptr) == RPSIM_CUDA_OK && count > 0;
}

rpsim_cuda_matrix matrix(void* data, int64_t rows, int64_t cols, int dtype = RPSIM_CUDA_F32) {
  return {dtype, data, rows, cols, cols, 1};
}

// A fake device address: never dereferenced on the host, and without a device
// no kernel runs.
void* fake(std::uintptr_t at) {
  return reinterpret_cast<void*>(at);
}

}  // namespace

TEST_CASE("cuda backend: the build lists its architectures, Blackwell included", "[device-arith]") {
  const std::string arch = rpsim_cuda_architectures();
  CHECK(arch.find("80-real") != std::string::npos);
  CHECK(arch.find("90a-real") != std::string::npos);
  CHECK(arch.find("100-real") != std::string::npos);
}

TEST_CASE("cuda backend: bad arguments are named before the device is looked for", "[device-arith]") {
  rpsim_cuda_error err{};
  CHECK(rpsim_cuda_round("fp17", nullptr, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr,
                         &err) == RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("fp17") != std::string::npos);
  rpsim_cuda_rounding r{};
  r.mode = "nearest_odd";
  CHECK(rpsim_cuda_round("bf16", &r, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr, &err) ==
        RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("nearest_odd") != std::string::npos);
  // Overflow and NaN-policy names come from formats' table (behaviour_names.hpp), listed in the message.
  r = rpsim_cuda_rounding{};
  r.overflow = "clamp";
  CHECK(rpsim_cuda_round("bf16", &r, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr, &err) ==
        RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("overflow 'clamp' is not infinity, nan or saturate") !=
        std::string::npos);
  r = rpsim_cuda_rounding{};
  r.nan_policy = "mips";
  CHECK(rpsim_cuda_round("bf16", &r, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr, &err) ==
        RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("nan_policy 'mips' is not x86, arm or riscv") != std::string::npos);
  CHECK(rpsim_cuda_round("fp64", nullptr, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr,
                         &err) == RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("f32 output") != std::string::npos);
  CHECK(rpsim_cuda_round("fp16", nullptr, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_U8, fake(128), 4, nullptr,
                         &err) == RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("narrower") != std::string::npos);
  CHECK(rpsim_cuda_round("fp16", nullptr, RPSIM_CUDA_F32, nullptr, RPSIM_CUDA_F32, fake(128), 4, nullptr,
                         &err) == RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(rpsim_cuda_fp8_quantize("e4m3", -1.0, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr,
                                &err) == RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("scale") != std::string::npos);

  auto a = matrix(fake(64), 4, 8), b = matrix(fake(128), 7, 3), d = matrix(fake(256), 4, 3);
  CHECK(rpsim_cuda_gemm("tc:h100:fp16:fp32", &a, &b, nullptr, &d, nullptr, nullptr, &err) ==
        RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("A's columns must equal B's rows") != std::string::npos);
  b = matrix(fake(128), 8, 3);
  CHECK(rpsim_cuda_gemm("tc:h999:fp16", &a, &b, nullptr, &d, nullptr, nullptr, &err) ==
        RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("h999") != std::string::npos);
  auto d64 = matrix(fake(256), 4, 3, RPSIM_CUDA_F64);
  CHECK(rpsim_cuda_gemm("tc:h100:fp16:fp32", &a, &b, nullptr, &d64, nullptr, nullptr, &err) ==
        (device_present() ? RPSIM_CUDA_OK : RPSIM_CUDA_NO_DEVICE));
  // Valid models the device does not run say so, on any machine.
  for (const char* model : {"pairwise:fp32:rne", "exact", "kahan:bf16:rne", "eigen", "fma:bf16:rne",
                            "tc:mi300:fp16:fp32:mfma", "kernel:h100:fp16:fp32:split_k=2:reduction=exact"}) {
    INFO(model);
    CHECK(rpsim_cuda_gemm(model, &a, &b, nullptr, &d64, nullptr, nullptr, &err) == RPSIM_CUDA_UNSUPPORTED);
    CHECK(std::string(err.message).find("not on the CUDA backend") != std::string::npos);
  }
  // A block-scaled instruction without its scales.
  CHECK(rpsim_cuda_gemm("tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0", &a, &b, nullptr, &d, nullptr, nullptr,
                        &err) == RPSIM_CUDA_BAD_ARGUMENT);
  CHECK(std::string(err.message).find("SFA and SFB") != std::string::npos);
  // A NULL error record is allowed.
  CHECK(rpsim_cuda_round("fp17", nullptr, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr,
                         nullptr) == RPSIM_CUDA_BAD_ARGUMENT);
}

TEST_CASE("cuda backend: without a device every good call returns RPSIM_CUDA_NO_DEVICE", "[device-arith]") {
  if (device_present()) RPSIM_SKIP("a CUDA device is present: the no-device path is not taken");
  rpsim_cuda_error err{};
  int count = -1;
  CHECK(rpsim_cuda_device_count(&count, &err) == RPSIM_CUDA_NO_DEVICE);
  CHECK(count == 0);
  CHECK(std::string(err.message).find("no CUDA device") != std::string::npos);
  rpsim_cuda_rounding r{};
  r.mode = "sr";
  r.seed = 7;
  CHECK(rpsim_cuda_round("bf16", &r, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr, &err) ==
        RPSIM_CUDA_NO_DEVICE);
  CHECK(err.code == RPSIM_CUDA_NO_DEVICE);
  double* out = static_cast<double*>(fake(512));
  CHECK(rpsim_cuda_amax(RPSIM_CUDA_F32, fake(64), 16, out, nullptr, &err) == RPSIM_CUDA_NO_DEVICE);
  CHECK(rpsim_cuda_fp8_quantize("e4m3", 2.0, RPSIM_CUDA_F32, fake(64), RPSIM_CUDA_F32, fake(128), 4, nullptr,
                                &err) == RPSIM_CUDA_NO_DEVICE);
  auto a = matrix(fake(64), 4, 8), b = matrix(fake(128), 8, 3), d = matrix(fake(256), 4, 3);
  for (const char* model : {"sequential:fp32:rne", "sequential:bf16:sr:seed=3", "tc:h100:fp16:fp32",
                            "cublas:h100:bf16:bf16", "kernel:h100:fp16:fp32:split_k=2"}) {
    INFO(model);
    CHECK(rpsim_cuda_gemm(model, &a, &b, nullptr, &d, nullptr, nullptr, &err) == RPSIM_CUDA_NO_DEVICE);
  }
  // After the refusals the runtime answers the same way (no sticky state).
  CHECK(rpsim_cuda_device_count(&count, &err) == RPSIM_CUDA_NO_DEVICE);
}

TEST_CASE("cuda backend: block quantisation names a bad recipe, option, output or rounding before the device",
          "[device-arith]") {
  rpsim_cuda_error err{};
  auto x = matrix(fake(64), 4, 64), v = matrix(fake(1024), 4, 64, RPSIM_CUDA_F64);
  auto q = [&](const char* recipe, const char* options, const rpsim_cuda_rounding* r = nullptr,
               const rpsim_cuda_matrix* values = nullptr) {
    return rpsim_cuda_block_quantize(recipe, options, &x, 1.0f, r, values ? values : &v, nullptr, nullptr,
                                     nullptr, nullptr, &err);
  };
  const int good = device_present() ? RPSIM_CUDA_OK : RPSIM_CUDA_NO_DEVICE;
  auto says = [&](const char* text) {
    INFO(err.message);
    CHECK(std::string(err.message).find(text) != std::string::npos);
  };
  // The recipe table's own errors (recipe.hpp recipe_spec), names listed.
  CHECK(q("te-mxfp8", nullptr) == RPSIM_CUDA_BAD_ARGUMENT);
  says("te-mxfp8");
  CHECK(q("torchao-mx", "scale_rule=round") == RPSIM_CUDA_BAD_ARGUMENT);
  says("round");
  CHECK(q("torchao-mx", "scale_rule") == RPSIM_CUDA_BAD_ARGUMENT);
  says("not name=value");
  // What the device does not run, named by its option.
  CHECK(q("te-fp8-current", nullptr) == RPSIM_CUDA_UNSUPPORTED);
  says("per-tensor");
  CHECK(q("te-nvfp4", "rht=true,direction=columnwise") == RPSIM_CUDA_UNSUPPORTED);
  says("not on the CUDA backend");
  CHECK(q("te-nvfp4", "four_over_six=mae") == RPSIM_CUDA_UNSUPPORTED);
  says("four_over_six");
  // Outputs: shapes, the FP8 block products f32 cannot hold, at least one.
  auto small = matrix(fake(1024), 4, 32, RPSIM_CUDA_F64);
  CHECK(q("torchao-mx", nullptr, nullptr, &small) == RPSIM_CUDA_BAD_ARGUMENT);
  says("values is 4x32, expected 4x64");
  auto v32 = matrix(fake(1024), 4, 64, RPSIM_CUDA_F32);
  CHECK(q("te-fp8-block", nullptr, nullptr, &v32) == RPSIM_CUDA_BAD_ARGUMENT);
  says("use f64");
  CHECK(rpsim_cuda_block_quantize("torchao-mx", nullptr, &x, 1.0f, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, nullptr, &err) == RPSIM_CUDA_BAD_ARGUMENT);
  says("no output");
  // Rounding: nearest even or stochastic, keyed by seed and stream only.
  rpsim_cuda_rounding r{};
  r.mode = "rtz";
  CHECK(q("torchao-mx", nullptr, &r) == RPSIM_CUDA_BAD_ARGUMENT);
  says("rne or sr");
  r = rpsim_cuda_rounding{};
  r.mode = "sr";
  r.overflow = "saturate";
  CHECK(q("torchao-mx", nullptr, &r) == RPSIM_CUDA_BAD_ARGUMENT);
  says("mode, seed and stream_id only");
  r = rpsim_cuda_rounding{};
  r.mode = "sr";
  CHECK(q("ocp-mx", "element=int8", &r) == RPSIM_CUDA_BAD_ARGUMENT);
  says("MXINT8");
  // Good calls: every device-run family, lines and tiles, nearest and stochastic.
  double ges = 0;
  CHECK(rpsim_cuda_block_quantize("te-nvfp4", "tile=16x16", &x, 3.5f, &r, &v, nullptr, nullptr, &ges, nullptr,
                                  &err) == good);
  CHECK(ges == double(rpsim::recipe::host::nvfp4_tensor_scale(3.5f, 448.0f).encode));
  CHECK(q("torchao-mx", "element=e2m1,scale_rule=rceil", &r) == good);
  CHECK(q("te-fp8-block", "pow2=true") == good);
  CHECK(q("ocp-mx", "element=int8") == good);
}
