// A capture_gemms manifest checked GEMM by GEMM (gemm_manifest.hpp): the 24
// measured H100 GEMMs of shared/cublas-h100 described as a capture from an
// H100 pass under the presets their dtypes and flags select; synthetic
// captures (D from sim::gemm) pass, a perturbed element fails by name, an
// alpha/beta epilogue is modelled; and the errors a user sees.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/io/npy.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/validation/gemm_manifest.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using rpsim::sim::AccumulationModel;
using rpsim::sim::GemmDumpError;
using rpsim::sim::Matrix;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("rpsim_manifest_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

rpsim::io::NumericArray array(const char* name, const Matrix& m, const char* dtype) {
  rpsim::io::NumericArray a{name, {std::size_t(m.rows()), std::size_t(m.cols())}, dtype, {}};
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) a.values.push_back(m(i, j));
  return a;
}

json entry(const std::string& file, std::size_t call, const Matrix& a, const Matrix& b,
           const std::string& device, const std::string& a_dtype, const std::string& d_dtype) {
  return {{"file", file},           {"call", call},           {"op", "mm"},    {"device", device},
          {"a_dtype", a_dtype},     {"d_dtype", d_dtype},     {"m", a.rows()}, {"n", b.cols()},
          {"k", a.cols()},          {"alpha", 1.0},           {"beta", 0.0},   {"batch", nullptr},
          {"batch_index", nullptr}, {"flags", json::object()}};
}

// `count` bf16 GEMMs whose D is `model`'s own, as capture_gemms writes them.
fs::path synthetic_capture(const std::string& name, const std::string& model, int count) {
  const fs::path dir = fresh_dir(name);
  const AccumulationModel m = AccumulationModel::parse(model);
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  json gemms = json::array();
  for (int g = 0; g < count; ++g) {
    Matrix a(5 + g, 24), b(24, 3 + g);
    for (auto* x : {&a, &b})
      for (Eigen::Index i = 0; i < x->size(); ++i) x->data()[i] = normal(rng);
    a = rpsim::sim::round_to_format(a, m.input_format());
    b = rpsim::sim::round_to_format(b, m.input_format());
    const Matrix d = rpsim::sim::gemm(m, a, b);
    const std::string file = "g0000" + std::to_string(g) + "_mm.npz";
    rpsim::io::write_atomic(
        dir / file,
        rpsim::io::npz_image({array("A", a, "float32"), array("B", b, "float32"), array("D", d, "float32")}));
    gemms.push_back(entry(file, std::size_t(g), a, b, "cpu", "bfloat16", "bfloat16"));
  }
  rpsim::io::write_atomic(dir / "manifest.json", json{{"gemms", gemms}, {"skipped", json::array()}}.dump(1));
  return dir;
}

const char* kBf16 = "cublas:h100:bf16:bf16:rpr=0";

}  // namespace

TEST_CASE("gemm-manifest: the shared H100 GEMMs as one capture select their presets and pass") {
  const fs::path shared = rpsim::test::shared_dir() / "cublas-h100";
  if (!fs::is_directory(shared)) {
    RPSIM_SKIP("skipped: " << shared << " is absent");
  }
  // What capture_gemms records for each call of the README's table: the
  // dtypes torch had and the flags set.
  const std::vector<std::tuple<std::string, std::string, std::string, json>> kinds = {
      {"fp16_fp32", "float16", "float32", json::object()},
      {"fp16_fp16_red0", "float16", "float16", {{"allow_fp16_reduced_precision_reduction", false}}},
      {"fp16_fp16_red1", "float16", "float16", {{"allow_fp16_reduced_precision_reduction", true}}},
      {"bf16_bf16_red0", "bfloat16", "bfloat16", {{"allow_bf16_reduced_precision_reduction", false}}},
      {"bf16_bf16_red1", "bfloat16", "bfloat16", {{"allow_bf16_reduced_precision_reduction", true}}},
      {"tf32_fp32", "float32", "float32", {{"allow_tf32", true}}},
      {"e4m3_float32", "float8_e4m3fn", "float32", json::object()},
      {"e4m3_bfloat16", "float8_e4m3fn", "bfloat16", json::object()}};
  json gemms = json::array();
  std::size_t call = 0;
  for (const char* shape : {"64x64x256", "256x128x1024", "128x128x4096"})
    for (const auto& [kind, a_dtype, d_dtype, flags] : kinds) {
      const fs::path file = shared / (std::string("s1_") + shape + "_" + kind + ".npz");
      const auto dump = rpsim::sim::load_gemm_dump({file}, rpsim::sim::DumpFormat::numpy);
      json e = entry(file.string(), call++, dump.a, dump.b, "NVIDIA H100 80GB HBM3", a_dtype, d_dtype);
      e["flags"] = flags;
      gemms.push_back(e);
    }
  const fs::path dir = fresh_dir("h100");
  rpsim::io::write_atomic(dir / "manifest.json", json{{"gemms", gemms}}.dump(1));
  const auto manifest = rpsim::sim::load_gemm_manifest(dir);
  const auto r = rpsim::sim::check_gemm_manifest(manifest, {});
  INFO(r.table());
  CHECK(r.passed == 24);
  CHECK(r.failed == 0);
  CHECK(r.rows.at(0).model == "cublas:h100:fp16:fp32");
  CHECK(r.rows.at(2).model == "cublas:h100:fp16:fp16:rpr=1");
  CHECK(r.rows.at(5).model == "cublas:h100:tf32:fp32");
  CHECK(r.rows.at(7).model == "cublas:h100:e4m3:bf16");
  CHECK(r.table().find("24 passed, 0 failed") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("gemm-manifest: a capture passes under its model and a perturbed element fails by name") {
  const fs::path dir = synthetic_capture("synthetic", kBf16, 3);
  auto r = rpsim::sim::check_gemm_manifest(rpsim::sim::load_gemm_manifest(dir), {kBf16});
  CHECK(r.passed == 3);
  CHECK(r.failed == 0);
  CHECK(r.mismatches.empty());
  // One element of the second GEMM moved one bf16 ulp.
  auto dump = rpsim::sim::load_gemm_dump({dir / "g00001_mm.npz"}, rpsim::sim::DumpFormat::numpy);
  const double v = dump.d(2, 1);
  dump.d(2, 1) = v + std::ldexp(1.0, std::ilogb(v) - 7);  // the next bf16 value up in magnitude
  rpsim::io::write_atomic(dir / "g00001_mm.npz",
                          rpsim::io::npz_image({array("A", dump.a, "float32"), array("B", dump.b, "float32"),
                                                array("D", dump.d, "float32")}));
  r = rpsim::sim::check_gemm_manifest(rpsim::sim::load_gemm_manifest(dir), {kBf16});
  CHECK(r.passed == 2);
  CHECK(r.failed == 1);
  REQUIRE(r.mismatches.size() == 1);
  CHECK(r.mismatches[0].rfind("g00001_mm.npz: D[2, 1] = ", 0) == 0);
  CHECK(r.table().find("2 passed, 1 failed") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("gemm-manifest: an alpha/beta epilogue rounds alpha*AB + beta*C once") {
  const fs::path dir = synthetic_capture("epilogue", kBf16, 1);
  const AccumulationModel m = AccumulationModel::parse(kBf16);
  auto dump = rpsim::sim::load_gemm_dump({dir / "g00000_mm.npz"}, rpsim::sim::DumpFormat::numpy);
  const Matrix c =
      rpsim::sim::round_to_format(Matrix::Constant(dump.d.rows(), dump.d.cols(), 0.3), m.output_format());
  const Matrix d = rpsim::sim::round_to_format(0.25 * dump.d + 0.5 * c, m.output_format());
  rpsim::io::write_atomic(dir / "g00000_mm.npz",
                          rpsim::io::npz_image({array("A", dump.a, "float32"), array("B", dump.b, "float32"),
                                                array("C", c, "float32"), array("D", d, "float32")}));
  json manifest = json::parse(std::ifstream(dir / "manifest.json"));
  manifest["gemms"][0]["alpha"] = 0.25;
  manifest["gemms"][0]["beta"] = 0.5;
  rpsim::io::write_atomic(dir / "manifest.json", manifest.dump());
  const auto r = rpsim::sim::check_gemm_manifest(rpsim::sim::load_gemm_manifest(dir), {kBf16});
  CHECK(r.passed == 1);
  CHECK(r.rows.at(0).note == "alpha=0.25 beta=0.5");
  fs::remove_all(dir);
}

TEST_CASE("gemm-manifest: missing files, no model for the CPU, an unfitted GPU") {
  const fs::path dir = synthetic_capture("errors", kBf16, 2);
  const auto manifest = rpsim::sim::load_gemm_manifest(dir);
  CHECK_THROWS_WITH(rpsim::sim::check_gemm_manifest(manifest, {}),
                    Catch::Contains("captured on the CPU") && Catch::Contains("--model"));
  CHECK_THROWS_WITH(rpsim::sim::check_gemm_manifest(manifest, {"cublas:h100:fp16:fp32"}),
                    Catch::Contains("given: cublas:h100:fp16:fp32"));
  auto gpu = manifest;
  for (auto& g : gpu.gemms) g.device = "NVIDIA A100-SXM4-80GB";
  CHECK_THROWS_WITH(rpsim::sim::check_gemm_manifest(gpu, {}),
                    Catch::Contains("'NVIDIA A100-SXM4-80GB'") && Catch::Contains("--infer"));
  for (auto& g : gpu.gemms) g.device = "NVIDIA H100 PCIe";  // fp32 without TF32: cuBLAS's SIMT path, unfitted
  for (auto& g : gpu.gemms) g.a_dtype = g.d_dtype = "float32";
  CHECK_THROWS_WITH(rpsim::sim::check_gemm_manifest(gpu, {}), Catch::Contains("cublas:h100:?:fp32"));
  fs::remove(dir / "g00001_mm.npz");
  CHECK_THROWS_AS(rpsim::sim::load_gemm_manifest(dir), GemmDumpError);
  CHECK_THROWS_WITH(
      rpsim::sim::load_gemm_manifest(dir),
      Catch::Contains("1 of the files it lists are missing") && Catch::Contains("g00001_mm.npz"));
  rpsim::io::write_atomic(dir / "manifest.json", R"({"gemms": [{"file": "g00000_mm.npz"}]})");
  CHECK_THROWS_WITH(rpsim::sim::load_gemm_manifest(dir), Catch::Contains("gemms[0]: no field \"op\""));
  fs::remove_all(dir);
}

TEST_CASE("gemm-manifest: the H100 _scaled_mm GEMMs with power-of-two scales pass through scale_epilogue") {
  const fs::path shared = rpsim::test::shared_dir() / "cublas-h100";
  if (!fs::is_directory(shared)) {
    RPSIM_SKIP("skipped: " << shared << " is absent");
  }
  // The measured D (scales 1) times scale_a * scale_b_j: exact in binary32
  // and bf16 whatever order the epilogue rounds in, so the measured bits
  // stand for a run with these scales. Per tensor scale_a, per column
  // scale_b.
  const fs::path dir = fresh_dir("scaled");
  json gemms = json::array();
  std::size_t call = 0;
  for (const char* shape : {"64x64x256", "256x128x1024", "128x128x4096"})
    for (const char* out : {"float32", "bfloat16"}) {
      const std::string file = std::string("s1_") + shape + "_e4m3_" + out + ".npz";
      auto dump = rpsim::sim::load_gemm_dump({shared / file}, rpsim::sim::DumpFormat::numpy);
      json sb = json::array();
      for (Eigen::Index j = 0; j < dump.d.cols(); ++j) {
        const double s = std::ldexp(1.0, int(j % 5) - 2);
        sb.push_back(s);
        dump.d.col(j) *= 2.0 * s;
      }
      rpsim::io::write_atomic(
          dir / file, rpsim::io::npz_image({array("A", dump.a, "float32"), array("B", dump.b, "float32"),
                                            array("D", dump.d, "float32")}));
      json e = entry(file, call++, dump.a, dump.b, "NVIDIA H100 80GB HBM3", "float8_e4m3fn", out);
      e["scales"] = {{"scale_a", 2.0}, {"scale_b", sb}};
      gemms.push_back(e);
    }
  rpsim::io::write_atomic(dir / "manifest.json", json{{"gemms", gemms}}.dump(1));
  const auto r = rpsim::sim::check_gemm_manifest(rpsim::sim::load_gemm_manifest(dir), {});
  INFO(r.table());
  CHECK(r.passed == 6);
  CHECK(r.failed == 0);
  CHECK(r.skipped == 0);
  CHECK(r.rows.at(1).model == "cublas:h100:e4m3:bf16:scales=row");
  // A per-tensor scale_a with a per-column scale_b is not a form the captures hold.
  CHECK(r.rows.at(1).note == "scales != 1 by scale_epilogue=b_then_a: unmeasured");
  fs::remove_all(dir);
}
