// gemm-check's library (gemm_check.hpp, gemm_infer.hpp): every measured
// cuBLAS GEMM of shared/cublas-h100 reproduced bit for bit by its preset (one
// test per shape, skipped when ../shared is absent), the slices copied to
// tests/data/gemm, dumps that fail to load, and the schedule search
// recovering known schedules from dumps rpsim wrote.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/io/npy.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/validation/gemm_check.hpp"
#include "rpsim/validation/gemm_infer.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using rpsim::sim::AccumulationModel;
using rpsim::sim::Matrix;

namespace {

// The preset a shared file was measured with: s1_MxNxK_IN_OUT[_redR].npz.
// (Split by hand: GCC 12 warns inside <regex> under the sanitizer build.)
std::string preset_for(const std::string& stem) {
  std::vector<std::string> part;
  for (std::size_t at = 0, end = 0; at <= stem.size(); at = end + 1) {
    end = std::min(stem.find('_', at), stem.size());
    part.push_back(stem.substr(at, end - at));
  }
  INFO(stem);
  REQUIRE((part.size() == 4 || part.size() == 5));
  REQUIRE(part[0] == "s1");
  std::string out = part[3];
  if (out == "float32") out = "fp32";
  if (out == "bfloat16") out = "bf16";
  std::string spec = "cublas:h100:" + part[2] + ":" + out;
  if (part.size() == 5) {
    REQUIRE((part[4] == "red0" || part[4] == "red1"));
    spec += ":rpr=" + part[4].substr(3);
  }
  return spec;
}

void check_shared_shape(const std::string& shape) {
  const fs::path dir = rpsim::test::shared_dir() / "cublas-h100";
  if (!fs::is_directory(dir)) {
    RPSIM_SKIP("skipped: " << dir << " is absent");
  }
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".npz" || stem.find("_" + shape + "_") == std::string::npos) continue;
    const auto dump = rpsim::sim::load_gemm_dump({e.path()}, rpsim::sim::DumpFormat::numpy);
    const auto model = AccumulationModel::parse(preset_for(stem));
    rpsim::sim::check_dump_formats(dump, model);
    const auto r = rpsim::sim::check_gemm(dump, model, 3, 2);
    INFO(stem << " under " << model.spec() << ": " << r.passed << "/" << r.total);
    CHECK(r.passed == r.total);
    CHECK(r.max_ulps == 0);
    ++files;
  }
  CHECK(files == 8);
}

fs::path data(const std::string& name) {
  return rpsim::test::source_dir() / "tests" / "data" / "gemm" / name;
}

rpsim::io::NumericArray array(const char* name, const Matrix& m, const char* dtype) {
  rpsim::io::NumericArray x{name, {std::size_t(m.rows()), std::size_t(m.cols())}, dtype, {}};
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) x.values.push_back(m(i, j));
  return x;
}

// A dump written by rpsim under a known schedule.
rpsim::sim::GemmDump dump_under(const std::string& spec, Eigen::Index m, Eigen::Index n, Eigen::Index k,
                                std::uint64_t seed) {
  const auto model = AccumulationModel::parse(spec);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  Matrix a(m, k), b(k, n);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = nd(rng);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = nd(rng);
  a = rpsim::sim::round_to_format(a, model.input_format());
  b = rpsim::sim::round_to_format(b, model.input_format());
  rpsim::sim::GemmDump d;
  d.source = spec;
  d.a = a;
  d.b = b;
  d.d = rpsim::sim::gemm(model, a, b);
  d.d_dtype = model.output_format() == rpsim::formats::binary16() ? "float16" : "float32";
  return d;
}

bool found(const rpsim::sim::InferResult& r, const std::string& spec) {
  for (const auto& s : r.exact) {
    if (s.spec == spec) return true;
  }
  return false;
}

// What the search reported, for a failure's message.
std::string reported(const rpsim::sim::InferResult& r) {
  std::string out;
  for (const auto& s : r.exact) out += "exact " + s.spec + "\n";
  for (const auto& s : r.best) out += "best " + s.spec + " " + std::to_string(s.passed) + "\n";
  return out;
}

}  // namespace

TEST_CASE("gemm-check: cuBLAS H100 64x64x256, all 8 kinds bit-exact under their presets",
          "[gemm_check][shared]") {
  check_shared_shape("64x64x256");
}

TEST_CASE("gemm-check: cuBLAS H100 256x128x1024, all 8 kinds bit-exact under their presets",
          "[gemm_check][shared]") {
  check_shared_shape("256x128x1024");
}

TEST_CASE("gemm-check: cuBLAS H100 128x128x4096 (split-K), all 8 kinds bit-exact under their presets",
          "[gemm_check][shared]") {
  check_shared_shape("128x128x4096");
}

TEST_CASE("gemm-check: the measured slices in tests/data reproduce without ../shared", "[gemm_check]") {
  // Rows and columns cut from s1_64x64x256_tf32_fp32 and _e4m3_float32: each
  // element depends on its row of A, its column of B and K only.
  const auto tf32 =
      rpsim::sim::load_gemm_dump({data("h100_tf32_fp32_16x16x256.npz")}, rpsim::sim::DumpFormat::numpy);
  const auto split = AccumulationModel::parse("kernel:h100:tf32:fp32:stored=fp32:split_k=8:split_tile=32");
  CHECK(rpsim::sim::check_gemm(tf32, split).passed == 256);
  const auto chain = AccumulationModel::parse("kernel:h100:tf32:fp32:stored=fp32");
  const auto wrong = rpsim::sim::check_gemm(tf32, chain, 5);
  CHECK(wrong.passed < 64);
  CHECK(wrong.first.size() == 5);
  CHECK(wrong.max_ulps >= 1);
  const auto fp8 =
      rpsim::sim::load_gemm_dump({data("h100_e4m3_fp32_8x8x256.npz")}, rpsim::sim::DumpFormat::numpy);
  CHECK(rpsim::sim::check_gemm(fp8, AccumulationModel::parse("cublas:h100:e4m3:fp32")).passed == 64);
  CHECK(rpsim::sim::check_gemm(fp8, AccumulationModel::parse("kernel:h100:e4m3:fp32:wgmma")).passed < 40);
}

TEST_CASE("gemm-check: ulp differences in the output format", "[gemm_check]") {
  using rpsim::sim::ulp_difference;
  const auto& h = rpsim::formats::binary16();
  CHECK(ulp_difference(1.0, 1.0 + 1.0 / 1024, h) == 1);
  CHECK(ulp_difference(1.0, 1.0 - 1.0 / 2048, h) == -1);  // the next value below, a finer spacing
  CHECK(ulp_difference(1.0 - 1.0 / 2048, 1.0 + 1.0 / 1024, h) == 2);
  CHECK(ulp_difference(-std::ldexp(1.0, -24), std::ldexp(1.0, -24), h) == 2);  // across zero
  CHECK(ulp_difference(std::ldexp(1.0, -14), std::ldexp(1.0, -14) - std::ldexp(1.0, -24), h) == -1);
  CHECK(ulp_difference(0.0, std::ldexp(1.0, -24), h) == 1);  // subnormal quantum
  CHECK(std::isinf(ulp_difference(1.0, INFINITY, h)));
  CHECK(ulp_difference(NAN, NAN, h) == 0);
  CHECK(!rpsim::sim::same_encoding(0.0, -0.0, h));
  CHECK(rpsim::sim::same_encoding(NAN, -NAN, h));
}

TEST_CASE("gemm-check: dumps that cannot be checked name the file and the array", "[gemm_check]") {
  const fs::path tmp = fs::temp_directory_path() / ("rpsim-gemm-check-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const Matrix a = Matrix::Constant(2, 3, 1.0), b = Matrix::Constant(3, 2, 0.5),
               d = Matrix::Constant(2, 2, 1.5);
  auto write = [&](const std::string& name, const std::vector<rpsim::io::NumericArray>& arrays) {
    rpsim::io::write_atomic(tmp / name, rpsim::io::npz_image(arrays));
    return tmp / name;
  };
  auto load = [](const fs::path& p) {
    return rpsim::sim::load_gemm_dump({p}, rpsim::sim::DumpFormat::numpy);
  };
  CHECK_THROWS_WITH(load(write("no_d.npz", {array("A", a, "float32"), array("B", b, "float32")})),
                    Catch::Contains("no_d.npz: no array D"));
  CHECK_THROWS_WITH(load(write("shape.npz", {array("A", a, "float32"), array("B", a, "float32"),
                                             array("D", d, "float32")})),
                    Catch::Contains("shape.npz: B is 2x3"));
  CHECK_THROWS_WITH(load(write("dshape.npz", {array("A", a, "float32"), array("B", b, "float32"),
                                              array("D", a, "float32")})),
                    Catch::Contains("dshape.npz: D is 2x3"));
  rpsim::io::NumericArray flat = array("A", a, "float32");
  flat.shape = {6};
  CHECK_THROWS_WITH(load(write("flat.npz", {flat, array("B", b, "float32"), array("D", d, "float32")})),
                    Catch::Contains("flat.npz: A: a matrix needs 2 dimensions"));
  // Values outside the model's formats, and non-finite inputs to a preset.
  const auto ok =
      load(write("ok.npz", {array("A", a, "float32"), array("B", b, "float32"), array("D", d, "float32")}));
  CHECK_NOTHROW(rpsim::sim::check_dump_formats(ok, AccumulationModel::parse("cublas:h100:fp16:fp32")));
  Matrix tenth = a;
  tenth(1, 2) = 0.1f;
  const auto bad_a = load(
      write("tenth.npz", {array("A", tenth, "float32"), array("B", b, "float32"), array("D", d, "float32")}));
  CHECK_THROWS_WITH(rpsim::sim::check_dump_formats(bad_a, AccumulationModel::parse("cublas:h100:fp16:fp32")),
                    Catch::Contains("tenth.npz: A[1, 2]") && Catch::Contains("not a binary16 value"));
  Matrix inf = a;
  inf(0, 0) = INFINITY;
  const auto bad_inf = load(
      write("inf.npz", {array("A", inf, "float32"), array("B", b, "float32"), array("D", d, "float32")}));
  CHECK_THROWS_WITH(
      rpsim::sim::check_dump_formats(bad_inf, AccumulationModel::parse("cublas:h100:bf16:bf16")),
      Catch::Contains("inf.npz: A[0, 0]") && Catch::Contains("finite"));
  // Every model, not only presets (issue 26: a NaN under exact or tc: gave exit 1 and "inf ulps").
  for (const char* model : {"tc:h100:bf16:fp32", "exact:binary32", "sequential:fp32"})
    CHECK_THROWS_WITH(rpsim::sim::check_dump_formats(bad_inf, AccumulationModel::parse(model)),
                      Catch::Contains("inf.npz: A[0, 0]") && Catch::Contains("finite"));
  Matrix d_third = d;
  d_third(0, 1) = 1.0f / 3.0f;
  const auto bad_d = load(write(
      "dthird.npz", {array("A", a, "float32"), array("B", b, "float32"), array("D", d_third, "float32")}));
  CHECK_THROWS_WITH(rpsim::sim::check_dump_formats(bad_d, AccumulationModel::parse("cublas:h100:bf16:bf16")),
                    Catch::Contains("dthird.npz: D[0, 1]"));
  // Separate .npy files named by their stem.
  rpsim::io::write_atomic(tmp / "run_A.npy", rpsim::io::npy_image(array("A", a, "float32")));
  rpsim::io::write_atomic(tmp / "run_B.npy", rpsim::io::npy_image(array("B", b, "float32")));
  rpsim::io::write_atomic(tmp / "run_D.npy", rpsim::io::npy_image(array("D", d, "float32")));
  const auto split = rpsim::sim::load_gemm_dump({tmp / "run_A.npy", tmp / "run_B.npy", tmp / "run_D.npy"},
                                                rpsim::sim::DumpFormat::numpy);
  CHECK(split.array_source('B') == (tmp / "run_B.npy").string() + ": run_B");
  CHECK(rpsim::sim::check_gemm(split, AccumulationModel::parse("tc:h100:fp16:fp32")).passed == 4);
  fs::remove_all(tmp);
}

TEST_CASE("gemm-check --infer: recovers the schedules rpsim wrote", "[gemm_check][infer]") {
  const std::pair<const char*, std::array<Eigen::Index, 3>> known[] = {
      {"kernel:h100:binary16:binary32:split_k=3", {8, 8, 1024}},
      {"kernel:a100:bfloat16:binary32", {8, 8, 512}},
      {"kernel:h100:e4m3:binary32:wgmma:promotion=2", {8, 8, 512}},
      {"kernel:h100:tf32:binary32:stored=binary32:input_rounding=rna:split_k=4", {8, 8, 256}},
      {"kernel:h100:binary16:binary32:split_k=2:reduction=exact", {16, 16, 512}},
  };
  for (const auto& [spec, shape] : known) {
    INFO(spec);
    const auto dump = dump_under(spec, shape[0], shape[1], shape[2], 14);
    const auto r = rpsim::sim::infer_schedule(dump, rpsim::sim::InferOptions{64, 256, 5, 50, 2});
    INFO(reported(r));
    CHECK(found(r, spec));
  }
}

TEST_CASE("gemm-check --infer: the cuBLAS schedules of shared dumps, split-K ones included",
          "[gemm_check][infer][shared]") {
  const fs::path dir = rpsim::test::shared_dir() / "cublas-h100";
  if (!fs::is_directory(dir)) {
    RPSIM_SKIP("skipped: " << dir << " is absent");
  }
  const std::pair<const char*, const char*> cases[] = {
      {"s1_64x64x256_fp16_fp32", "kernel:h100:binary16:binary32"},
      {"s1_64x64x256_tf32_fp32", "kernel:h100:tf32:binary32:stored=binary32:split_k=8:split_tile=32"},
      {"s1_64x64x256_e4m3_float32", "kernel:h100:e4m3:binary32:wgmma:promotion=4"},
      // The split-K shapes (about 3 s of CPU each).
      {"s1_128x128x4096_fp16_fp32", "kernel:h100:binary16:binary32:split_k=3"},
      {"s1_128x128x4096_tf32_fp32", "kernel:h100:tf32:binary32:stored=binary32:split_k=22"},
  };
  for (const auto& [file, spec] : cases) {
    INFO(file);
    const auto dump =
        rpsim::sim::load_gemm_dump({dir / (std::string(file) + ".npz")}, rpsim::sim::DumpFormat::numpy);
    const auto r = rpsim::sim::infer_schedule(dump, rpsim::sim::InferOptions{64, 1024, 5, 50, 2});
    INFO(reported(r));
    CHECK(found(r, spec));
    CHECK(!r.presets.empty());
  }
}

// Issue 26: a D computed as the exact product rounded once to binary32 (what
// `--model exact:binary32` reproduces) scored 2786/16384 at best, and a
// binary32 sum over K from its last index down 450/16384, when the search
// held only Tensor Core schedules. Both must come first, named as a user
// writes them (with the order as a note), from binary32 inputs.
TEST_CASE("gemm-check --infer: plain models (exact, reverse-order sequential) come first",
          "[gemm_check][infer]") {
  std::mt19937_64 rng(26);
  std::normal_distribution<double> nd(0, 1);
  Matrix a(16, 512), b(512, 16);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = nd(rng);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = nd(rng);
  a = rpsim::sim::round_to_format(a, rpsim::formats::binary32());
  b = rpsim::sim::round_to_format(b, rpsim::formats::binary32());
  rpsim::sim::GemmDump dump;
  dump.a = a;
  dump.b = b;
  dump.d_dtype = "float32";
  const rpsim::sim::InferOptions options{64, 256, 5, 50, 2};

  dump.source = "exact";
  dump.d = rpsim::sim::gemm(AccumulationModel::parse("exact:binary32"), a, b);
  auto r = rpsim::sim::infer_schedule(dump, options);
  INFO(reported(r));
  REQUIRE(!r.exact.empty());
  CHECK(r.exact.front().spec == "exact:binary32");
  CHECK(r.exact.front().note.empty());
  CHECK(r.exact.front().max_ulps == 0);

  dump.source = "reverse";
  const Matrix a_rev = a.rowwise().reverse(), b_rev = b.colwise().reverse();
  dump.d = rpsim::sim::gemm(AccumulationModel::parse("sequential:fp32:rne"), a_rev, b_rev);
  r = rpsim::sim::infer_schedule(dump, options);
  INFO(reported(r));
  REQUIRE(!r.exact.empty());
  CHECK(r.exact.front().spec == "sequential:fp32:rne");
  CHECK(r.exact.front().note == "K in decreasing order");
  // Forward order is a different model: it is not reported as reproducing the dump.
  for (const auto& s : r.exact) CHECK_FALSE((s.spec == "sequential:fp32:rne" && s.note.empty()));
  // Ranked: more bit-exact first, then max ulps.
  for (std::size_t i = 1; i < r.best.size(); ++i)
    CHECK_FALSE(rpsim::sim::ranks_before(r.best[i], r.best[i - 1]));
}

// With the plain models added, every small cuBLAS dump still names its preset
// (the large split-K ones are in the case above).
TEST_CASE("gemm-check --infer: every 64x64x256 cuBLAS dump still names a preset",
          "[gemm_check][infer][shared]") {
  const fs::path dir = rpsim::test::shared_dir() / "cublas-h100";
  if (!fs::is_directory(dir)) {
    WARN("skipped: " << dir << " is absent");
    return;
  }
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("s1_64x64x256_", 0) != 0 || e.path().extension() != ".npz") continue;
    INFO(name);
    const auto dump = rpsim::sim::load_gemm_dump({e.path()}, rpsim::sim::DumpFormat::numpy);
    const auto r = rpsim::sim::infer_schedule(dump, rpsim::sim::InferOptions{64, 1024, 5, 50, 2});
    INFO(reported(r));
    CHECK(!r.exact.empty());
    CHECK(!r.presets.empty());
    ++checked;
  }
  CHECK(checked == 8);
}
