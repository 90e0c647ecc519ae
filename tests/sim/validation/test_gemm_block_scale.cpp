// Block-scaled GEMMs (gemm.hpp GemmScales), and the GEMMs of every other
// datapath, against MMA-Sim's vectors for the same a, b, c and scales (tests/data/mma-sim excerpt;
// ../shared/mma-sim when present), and gemm-check on a capture manifest whose GEMMs carry SFA/SFB.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/io/npy.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/validation/gemm_manifest.hpp"
#include "rpsim/validation/mma_sim_vectors.hpp"
#include "shared_data.hpp"

namespace {

namespace fs = std::filesystem;
using namespace rpsim;
using namespace rpsim::sim;

bool block_scaled_file(const fs::path& p) {
  return p.filename().string().find("block_scale__") != std::string::npos;
}

// Cases [first, first + n) of `f` as one n x K x n GEMM: row i of A, column i
// of B, C(i, i), SFA row i and SFB column i from case first + i (the other
// elements of C zero), so that D(i, i) is that case's d.
struct Diagonal {
  Matrix a, b, c;
  GemmScales scales;
};
Diagonal diagonal(const MmaSimFile& f, std::size_t first, Eigen::Index n) {
  const auto k = static_cast<Eigen::Index>(f.k);
  const auto kb = static_cast<Eigen::Index>(f.block_size ? f.k / f.block_size : 0);
  Diagonal g{Matrix(n, k), Matrix(k, n), Matrix::Zero(n, n), {}};
  if (kb > 0) {
    g.scales.sfa = Matrix(n, kb);
    g.scales.sfb = Matrix(kb, n);
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    const MmaSimCase& gc = f.cases[first + std::size_t(i)];
    for (Eigen::Index t = 0; t < k; ++t) {
      g.a(i, t) = gc.a[std::size_t(t)];
      g.b(t, i) = gc.b[std::size_t(t)];
    }
    for (Eigen::Index t = 0; t < kb; ++t) {
      (*g.scales.sfa)(i, t) = gc.sa[std::size_t(t)];
      (*g.scales.sfb)(t, i) = gc.sb[std::size_t(t)];
    }
    g.c(i, i) = gc.c;
  }
  return g;
}

// Elements of D(i, i) equal to the file's d (NaN: MMA-Sim's canonical NaN,
// which any NaN of the GEMM's doubles stands for).
std::size_t check_file(const fs::path& p, std::size_t& total) {
  const MmaSimFile f = load_mma_sim_file(p);
  std::string why;
  const auto tc = mma_sim_model(f, why);
  INFO(p.filename().string() << ": " << why);
  REQUIRE(tc.has_value());
  REQUIRE(tc->scale_block == static_cast<int>(f.block_size));
  // A model's C is a value of its output format: binary16 C on Volta's f16
  // files, as the GEMM takes it.
  const AccumulationModel model(*tc);
  std::size_t passed = 0;
  for (std::size_t first = 0; first < f.cases.size(); first += 32) {
    const auto n = static_cast<Eigen::Index>(std::min<std::size_t>(32, f.cases.size() - first));
    const Diagonal g = diagonal(f, first, n);
    const Matrix d = gemm(model, g.a, g.b, g.c, g.scales);
    for (Eigen::Index i = 0; i < n; ++i) {
      const MmaSimCase& gc = f.cases[first + std::size_t(i)];
      const double want = to_double(f.d.format, gc.d_bits);
      const bool ok = std::isnan(want)
                          ? std::isnan(d(i, i))
                          : !std::isnan(d(i, i)) &&
                                round_double(f.d.format, d(i, i), RoundingMode::nearest_even) == gc.d_bits;
      if (!ok) UNSCOPED_INFO("line " << gc.line << ": want " << want << " got " << d(i, i));
      passed += ok;
      ++total;
    }
  }
  return passed;
}

}  // namespace

TEST_CASE("gemm block scale: one instruction's K equals the MMA-Sim excerpt, element by element",
          "[gemm][block-scale]") {
  std::size_t files = 0, total = 0, passed = 0;
  for (const auto& p : mma_sim_files(test::source_dir() / "tests" / "data" / "mma-sim"))
    if (block_scaled_file(p)) {
      ++files;
      passed += check_file(p, total);
    }
  CHECK(files >= 3);  // tcgen05 mxf8f6f4 ue8m0, tcgen05 and sm_120 mxf4nvf4 ue4m3
  CHECK(total >= 120);
  CHECK(passed == total);
}

TEST_CASE("gemm block scale: one instruction's K equals every shared MMA-Sim block-scale file",
          "[gemm][block-scale][shared]") {
  const fs::path dir = test::shared_dir() / "mma-sim";
  if (!fs::is_directory(dir)) RPSIM_SKIP("shared/mma-sim not found under " << test::shared_dir().string());
  std::size_t files = 0, total = 0, passed = 0;
  for (const auto& p : mma_sim_files(dir))
    if (block_scaled_file(p)) {
      ++files;
      passed += check_file(p, total);
    }
  CHECK(files == 15);  // 7 tcgen05 + 8 sm_120 (the set's README)
  CHECK(total == 15 * 2000);
  CHECK(passed == total);
}

// Every datapath (NVIDIA block FMA through the GEMM executor, AMD mfma and
// FP64 FMA chains element by element): the whole GEMM of one instruction's K
// agrees with MMA-Sim as tc-validate's per-element check does.
TEST_CASE("gemm block scale: every datapath's GEMM equals the MMA-Sim excerpt on the diagonal",
          "[gemm][mma-sim]") {
  std::size_t files = 0, total = 0, passed = 0;
  for (const auto& p : mma_sim_files(test::source_dir() / "tests" / "data" / "mma-sim")) {
    ++files;
    passed += check_file(p, total);
  }
  CHECK(files >= 14);
  CHECK(passed == total);
}

TEST_CASE("gemm block scale: every datapath's GEMM equals every shared MMA-Sim file on the diagonal",
          "[gemm][mma-sim][shared]") {
  const fs::path dir = test::shared_dir() / "mma-sim";
  if (!fs::is_directory(dir)) RPSIM_SKIP("shared/mma-sim not found under " << test::shared_dir().string());
  std::size_t files = 0, total = 0, passed = 0;
  for (const auto& p : mma_sim_files(dir)) {
    ++files;
    passed += check_file(p, total);
  }
  CHECK(files == 193);
  CHECK(total == 386000);
  CHECK(passed == total);
}

namespace {

io::NumericArray array(const char* name, const Matrix& m) {
  io::NumericArray x{name, {std::size_t(m.rows()), std::size_t(m.cols())}, "float32", {}};
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) x.values.push_back(m(i, j));
  return x;
}

// A capture directory of `n` 1 x K x 1 GEMMs, one per MMA-Sim case (D the
// case's d, C its c with beta = 1, SFA and SFB its scales), under `spec`.
void write_manifest(const fs::path& dir, const MmaSimFile& f, std::size_t n, const std::string& spec) {
  fs::create_directories(dir);
  nlohmann::json gemms = nlohmann::json::array();
  for (std::size_t i = 0; i < n; ++i) {
    const Diagonal g = diagonal(f, i, 1);
    const std::string file = fmt::format("g{:05d}_mm.npz", i);
    Matrix d(1, 1);
    d(0, 0) = to_double(f.d.format, f.cases[i].d_bits);
    io::write_atomic(dir / file,
                     io::npz_image({array("A", g.a), array("B", g.b), array("C", g.c), array("D", d),
                                    array("SFA", *g.scales.sfa), array("SFB", *g.scales.sfb)}));
    gemms.push_back({{"file", file},
                     {"call", i},
                     {"op", "mm"},
                     {"m", 1},
                     {"n", 1},
                     {"k", f.k},
                     {"a_dtype", "float8_e4m3fn"},
                     {"d_dtype", "float32"},
                     {"alpha", 1.0},
                     {"beta", 1.0},
                     {"device", "NVIDIA B200"}});
  }
  std::ofstream(dir / "manifest.json") << nlohmann::json{{"model", spec}, {"gemms", gemms}}.dump(1);
}

}  // namespace

TEST_CASE("gemm block scale: gemm-check on a manifest with SFA/SFB passes, a perturbed element fails by name",
          "[gemm][block-scale][manifest]") {
  const fs::path src = test::source_dir() / "tests" / "data" / "mma-sim" /
                       "Blackwell__tcgen05mma_block_scale__m128n8k32.block32.f32.e4m3.e5m2.ue8m0.txt";
  const MmaSimFile f = load_mma_sim_file(src);
  // Finite cases only: gemm-check takes finite inputs.
  MmaSimFile finite = f;
  finite.cases.clear();
  for (const auto& gc : f.cases) {
    bool ok = std::isfinite(gc.c) && std::isfinite(to_double(f.d.format, gc.d_bits));
    for (const auto* v : {&gc.a, &gc.b, &gc.sa, &gc.sb})
      for (const double x : *v) ok = ok && std::isfinite(x);
    if (ok) finite.cases.push_back(gc);
  }
  REQUIRE(finite.cases.size() >= 12);
  const std::string spec = "tc:b200:e4m3:fp32:tcgen05.mma:input_b=e5m2:scale=ue8m0:scale_block=32";
  const fs::path dir = fs::temp_directory_path() / fmt::format("rpsim-bs-manifest-{}", ::getpid());
  fs::remove_all(dir);
  write_manifest(dir, finite, 12, spec);
  const ManifestReport ok = check_gemm_manifest(load_gemm_manifest(dir), {});
  INFO(ok.table());
  CHECK(ok.passed == 12);
  CHECK(ok.failed == 0);
  CHECK(ok.rows.at(0).model == spec);

  // One element of one D moved by an ulp of binary32.
  auto dump = io::read_array_file(dir / "g00007_mm.npz");
  for (auto& x : dump)
    if (x.name == "D") x.values[0] = std::nextafter(static_cast<float>(x.values[0]), INFINITY);
  io::write_atomic(dir / "g00007_mm.npz", io::npz_image(dump));
  const ManifestReport bad = check_gemm_manifest(load_gemm_manifest(dir), {});
  INFO(bad.table());
  CHECK(bad.passed == 11);
  CHECK(bad.failed == 1);
  REQUIRE(bad.mismatches.size() == 1);
  CHECK(bad.mismatches[0].find("g00007_mm.npz: D[0, 0]") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("gemm block scale: _scaled_mm scales in a manifest and in a dump are checked under the epilogue",
          "[gemm][manifest]") {
  const std::string spec = "tc:h100:e4m3:fp32:wgmma";
  const AccumulationModel model = AccumulationModel::parse(spec);
  Matrix a(2, 32), b(32, 2);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = 0.25 * double(i % 7) - 0.5;
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = 1.5 - 0.125 * double(i % 11);
  const Matrix ab = gemm(model, a, b);
  Matrix d(2, 2);  // fl32(fl32(3 * 0.1f) * AB): the epilogue written out here
  for (Eigen::Index i = 0; i < d.size(); ++i)
    d.data()[i] = static_cast<double>((3.0f * 0.1f) * static_cast<float>(ab.data()[i]));
  const fs::path dir = fs::temp_directory_path() / fmt::format("rpsim-scaled-mm-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Matrix sa = Matrix::Constant(1, 1, 3.0), sb = Matrix::Constant(1, 1, static_cast<double>(0.1f));
  io::write_atomic(dir / "g0.npz", io::npz_image({array("A", a), array("B", b), array("D", d)}));
  io::write_atomic(dir / "dump.npz", io::npz_image({array("A", a), array("B", b), array("D", d),
                                                    array("scale_a", sa), array("scale_b", sb)}));
  const nlohmann::json entry = {{"file", "g0.npz"},
                                {"call", 0},
                                {"op", "_scaled_mm"},
                                {"m", 2},
                                {"n", 2},
                                {"k", 32},
                                {"a_dtype", "float8_e4m3fn"},
                                {"d_dtype", "float32"},
                                {"alpha", 1.0},
                                {"beta", 0.0},
                                {"device", "NVIDIA H100"},
                                {"scales", {{"scale_a", {3.0}}, {"scale_b", {static_cast<double>(0.1f)}}}}};
  std::ofstream(dir / "manifest.json") << nlohmann::json{{"model", spec}, {"gemms", {entry}}}.dump();
  const GemmManifest manifest = load_gemm_manifest(dir);
  CHECK(manifest.gemms.at(0).scale_a == std::vector<double>{3.0});
  const ManifestReport r = check_gemm_manifest(manifest, {});
  INFO(r.table());
  // Checked, the rounding order said beside the count (kernel_schedule.hpp scale_epilogue): per
  // tensor without C it is the measured one (the H200 _scaled_mm captures).
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0].passed == 4);
  CHECK(r.rows[0].note == "scales != 1 by scale_epilogue=product: measured (per tensor)");
  CHECK(r.skipped == 0);
  // The same GEMM as a dump carrying scale_a and scale_b: checked under the epilogue.
  const GemmDump dump = load_gemm_dump({dir / "dump.npz"}, DumpFormat::numpy);
  REQUIRE(dump.scales.scale_a.has_value());
  check_dump_formats(dump, model);
  const GemmCheckResult c = check_gemm(dump, model);
  CHECK(c.passed == 4);
  CHECK(c.total == 4);
  fs::remove_all(dir);
}
