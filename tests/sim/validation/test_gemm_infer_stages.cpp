// gemm-check --infer's shortcuts (issue #30: confirm-sample screens stopping
// at the first miss, whole-dump checks by blocks of rows, plain models and
// presets screened before a whole GEMM) change its cost, not its report: the
// same dumps searched with every stage counting every candidate
// (InferOptions::exact_first = false) give the same report, field by field.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/validation/gemm_infer.hpp"
#include "shared_data.hpp"

namespace {

using rpsim::sim::AccumulationModel;
using rpsim::sim::Matrix;

// Everything the search reports, one line per field.
std::string report(const rpsim::sim::InferResult& r) {
  std::string out = "candidates " + std::to_string(r.candidates) + (r.truncated ? " truncated\n" : "\n");
  auto list = [&](const char* what, const std::vector<rpsim::sim::InferredSchedule>& v) {
    for (const auto& s : v) {
      out += std::string(what) + " " + s.spec + " [" + s.note + "] " + std::to_string(s.passed) + "/" +
             std::to_string(s.total) + " max " + std::to_string(s.max_ulps) + " mean " +
             std::to_string(s.mean_ulps);
      for (const auto& e : s.equivalents) out += " =" + e;
      out += "\n";
    }
  };
  list("exact", r.exact);
  list("best", r.best);
  for (const auto& p : r.presets) out += "preset " + p + "\n";
  return out;
}

void same_report(const rpsim::sim::GemmDump& dump) {
  rpsim::sim::InferOptions fast{64, 256, 5, 50, 1}, counted = fast;
  counted.exact_first = false;
  const std::string a = report(rpsim::sim::infer_schedule(dump, fast));
  const std::string b = report(rpsim::sim::infer_schedule(dump, counted));
  INFO(dump.source << "\nshortcuts:\n" << a << "counted:\n" << b);
  const bool reported = a.find("exact ") != std::string::npos || a.find("best ") != std::string::npos;
  CHECK(reported);
  CHECK(a == b);
}

rpsim::sim::GemmDump dump_under(const std::string& spec, Eigen::Index m, Eigen::Index n, Eigen::Index k) {
  const auto model = AccumulationModel::parse(spec);
  std::mt19937_64 rng(23);
  std::normal_distribution<double> nd(0, 1);
  Matrix a(m, k), b(k, n);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = nd(rng);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = nd(rng);
  rpsim::sim::GemmDump d;
  d.source = spec;
  d.a = rpsim::sim::round_to_format(a, model.input_format());
  d.b = rpsim::sim::round_to_format(b, model.input_format());
  d.d = rpsim::sim::gemm(model, d.a, d.b);
  d.d_dtype = model.output_format() == rpsim::formats::binary16() ? "float16" : "float32";
  return d;
}

}  // namespace

TEST_CASE("gemm-check --infer: the shortcuts give the counted search's report", "[gemm_check][infer]") {
  // bf16 output: many schedules agree on samples (the case the shortcuts are for).
  for (const char* spec :
       {"kernel:h100:bfloat16:bfloat16:split_k=3", "kernel:h100:binary16:binary32:split_k=2",
        "kernel:h100:e4m3:binary32:wgmma:promotion=2", "sequential:fp32:rne"}) {
    same_report(dump_under(spec, 40, 24, 512));
  }
  // Nothing reproduces it (one element off by an ulp): the best, ranked by counts.
  auto off = dump_under("kernel:h100:binary16:binary32:split_k=3", 24, 24, 512);
  off.d(3, 5) = double(std::nextafter(float(off.d(3, 5)), 1e30f));  // one binary32 ulp up
  same_report(off);
}

TEST_CASE("gemm-check --infer: the shortcuts give the counted search's report on cuBLAS dumps",
          "[gemm_check][infer][shared]") {
  const auto dir = rpsim::test::shared_dir() / "cublas-h100";
  if (!std::filesystem::is_directory(dir)) RPSIM_SKIP("no " << dir << " (../shared not present)");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".npz" || stem.find("_64x64x256_") == std::string::npos) continue;
    same_report(rpsim::sim::load_gemm_dump({e.path()}, rpsim::sim::DumpFormat::numpy));
    ++files;
  }
  CHECK(files == 8);
}
