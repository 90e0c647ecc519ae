// A capture's "cublas" record used first (issue #40), and issue #36's
// manifest defects: a file swapped for another GEMM's (8), a folder that is
// not a capture (13). Synthetic captures whose D a known schedule computed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

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
  const fs::path d =
      fs::temp_directory_path() / ("rpsim_manifest_rec_" + name + "_" + std::to_string(getpid()));
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

Matrix random_fp16(Eigen::Index r, Eigen::Index c, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd;
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = nd(rng);
  return rpsim::sim::round_to_format(m, rpsim::formats::binary16());
}

// One fp16 -> fp16 GEMM on an H100 whose D `schedule` computed; `cublas`
// the entry's record (null: none).
fs::path capture(const std::string& name, const std::string& schedule, const json& cublas, long m = 16,
                 long n = 16, long k = 4096) {
  const fs::path dir = fresh_dir(name);
  const Matrix a = random_fp16(m, k, 1), b = random_fp16(k, n, 2);
  const Matrix d = rpsim::sim::gemm(AccumulationModel::parse(schedule), a, b);
  rpsim::io::write_atomic(
      dir / "g00000_mm.npz",
      rpsim::io::npz_image({array("A", a, "float16"), array("B", b, "float16"), array("D", d, "float16")}));
  json e = {{"file", "g00000_mm.npz"},
            {"call", 0},
            {"op", "mm"},
            {"device", "NVIDIA H100 80GB HBM3"},
            {"a_dtype", "float16"},
            {"d_dtype", "float16"},
            {"m", m},
            {"n", n},
            {"k", k},
            {"alpha", 1.0},
            {"beta", 0.0},
            {"batch", nullptr},
            {"batch_index", nullptr},
            {"flags", {{"allow_fp16_reduced_precision_reduction", true}}}};
  if (!cublas.is_null()) e["cublas"] = cublas;
  rpsim::io::write_atomic(dir / "manifest.json", json{{"gemms", json::array({e})}}.dump(1));
  return dir;
}

const json kSerialRecord = {
    {"heuristic",
     {{"algo_id", 66}, {"tile_id", 18}, {"stages_id", 22}, {"splitk_num", 3}, {"reduction_scheme", 0}}},
    {"kernels",
     json::array({{{"name", "nvjet_sm90_hsh_64x32_64x16_2x2_h_bz_splitK_NNT"}, {"grid", {4, 6, 1}}}})}};

}  // namespace

TEST_CASE("gemm-manifest record: the recorded schedule is used first and said so", "[manifest]") {
  // D from 3 slices merged serially in fp16 (REDUCTION_SCHEME NONE), which
  // the preset's guess (3 slices, binary32 workspace) gets wrong.
  const std::string serial = "kernel:h100:fp16:fp16:split_k=3:merge=serial";
  const fs::path with = capture("with", serial, kSerialRecord);
  auto r = rpsim::sim::check_gemm_manifest(rpsim::sim::load_gemm_manifest(with), {});
  INFO(r.table());
  CHECK(r.passed == 1);
  CHECK(r.rows.at(0).model == "cublas:h100:fp16:fp16:rpr=1");
  CHECK(r.rows.at(0).schedule == "recorded: nvjet, split-K 3 x 64-k tiles, serial in the output format");
  CHECK(r.table().find("schedule recorded: nvjet") != std::string::npos);
  // The same GEMM without a record: the guess, which misses, and says it guessed.
  const fs::path without = capture("without", serial, nullptr);
  r = rpsim::sim::check_gemm_manifest(rpsim::sim::load_gemm_manifest(without), {});
  CHECK(r.failed == 1);
  CHECK(r.rows.at(0).schedule.starts_with("guessed: "));
  // A record of a kernel no schedule models: the guess, and why.
  json segk = kSerialRecord;
  segk["kernels"][0]["name"] =
      "sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x64_execute_segment_k_on_kernel";
  const fs::path seg = capture("segk", "cublas:h100:fp16:fp16:rpr=1", segk);
  r = rpsim::sim::check_gemm_manifest(rpsim::sim::load_gemm_manifest(seg), {});
  CHECK(r.passed == 1);
  CHECK(r.rows.at(0).schedule.starts_with("guessed: the recorded sm90_xmma segment-K is not modelled"));
  // A query that failed at capture is said.
  const fs::path failed =
      capture("failed", "cublas:h100:fp16:fp16:rpr=1", {{"heuristic", {{"error", "no GPU"}}}});
  r = rpsim::sim::check_gemm_manifest(rpsim::sim::load_gemm_manifest(failed), {});
  CHECK(r.rows.at(0).schedule.find("the capture's query failed: no GPU") != std::string::npos);
  // A record that is not an object is an error naming the entry.
  json bad = json::parse(std::ifstream(with / "manifest.json"));
  bad["gemms"][0]["cublas"]["heuristic"]["splitk_num"] = "three";
  rpsim::io::write_atomic(with / "manifest.json", bad.dump());
  CHECK_THROWS_WITH(rpsim::sim::load_gemm_manifest(with),
                    Catch::Contains("gemms[0]: cublas.heuristic.splitk_num = \"three\" is not an integer"));
  for (const auto& d : {with, without, seg, failed}) fs::remove_all(d);
}

TEST_CASE("gemm-manifest: a file swapped for another GEMM's is an error naming both (issue 36.8)",
          "[manifest]") {
  const fs::path dir = capture("swap", "cublas:h100:fp16:fp16:rpr=1", nullptr, 16, 16, 256);
  const auto manifest = rpsim::sim::load_gemm_manifest(dir);
  CHECK(rpsim::sim::check_gemm_manifest(manifest, {}).passed == 1);
  // g00000_mm.npz replaced by a bmm batch element of another shape.
  const Matrix a = random_fp16(8, 32, 3), b = random_fp16(32, 4, 4);
  const Matrix d = rpsim::sim::gemm(AccumulationModel::parse("cublas:h100:fp16:fp16"), a, b);
  rpsim::io::write_atomic(
      dir / "g00000_mm.npz",
      rpsim::io::npz_image({array("A", a, "float16"), array("B", b, "float16"), array("D", d, "float16")}));
  CHECK_THROWS_AS(rpsim::sim::check_gemm_manifest(manifest, {}), GemmDumpError);
  CHECK_THROWS_WITH(
      rpsim::sim::check_gemm_manifest(manifest, {}),
      Catch::Contains("g00000_mm.npz is not the GEMM of manifest entry gemms[0] (mm 16x16x256") &&
          Catch::Contains("A is 8x32, not 16x256"));
  CHECK_THROWS_WITH(rpsim::sim::infer_gemm_manifest(manifest, {}), Catch::Contains("A is 8x32, not 16x256"));
  // Same shape, but the file's name is another op's and it holds a C.
  fs::rename(dir / "g00000_mm.npz", dir / "g00000_bmm_b1.npz");
  auto m2 = manifest;
  m2.gemms[0].file = "g00000_bmm_b1.npz";
  const Matrix a2 = random_fp16(16, 256, 5), b2 = random_fp16(256, 16, 6);
  rpsim::io::write_atomic(dir / "g00000_bmm_b1.npz",
                          rpsim::io::npz_image({array("A", a2, "float16"), array("B", b2, "float16"),
                                                array("C", Matrix::Zero(16, 16), "float16"),
                                                array("D", Matrix::Zero(16, 16), "float32")}));
  CHECK_THROWS_WITH(rpsim::sim::check_gemm_manifest(m2, {}),
                    Catch::Contains("D is stored as float32, where float16 is stored as float16") &&
                        Catch::Contains("it holds C, but the entry's beta is 0") &&
                        Catch::Contains("its name says op bmm") &&
                        Catch::Contains("its name says batch element 1"));
  fs::remove_all(dir);
}

TEST_CASE("gemm-manifest: a folder without manifest.json says what gemm-check reads (issue 36.13)",
          "[manifest]") {
  const fs::path dir = fresh_dir("plain");
  const Matrix a = random_fp16(4, 8, 7), b = random_fp16(8, 4, 8);
  rpsim::io::write_atomic(
      dir / "s1_4x4x8_fp16_fp32.npz",
      rpsim::io::npz_image(
          {array("A", a, "float16"), array("B", b, "float16"),
           array("D", rpsim::sim::round_to_format(a * b, rpsim::formats::binary32()), "float32")}));
  CHECK_THROWS_WITH(rpsim::sim::load_gemm_manifest(dir),
                    Catch::Contains("has no manifest.json") && Catch::Contains("capture_gemms") &&
                        Catch::Contains((dir / "s1_4x4x8_fp16_fp32.npz").string() + " --model MODEL"));
  fs::remove_all(dir);
}
