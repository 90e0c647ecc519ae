// The tensor-cores study: the probes must find parameters they never read,
// on hand-built models and on every preset of a --quick run.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>

#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/study/tensor_cores.hpp"
#include "shared_data.hpp"
#include "study_csv.hpp"

using namespace rpsim;
using namespace rpsim::sim;
using namespace rpsim::sim::study;

namespace {
DetectedFeatures detect(const TensorCoreModel& m) {
  return detect_features([&m](std::span<const double> a, std::span<const double> b,
                              double c) { return tensor_core_dot(m, a, b, c); },
                         m.input, m.output);
}
}  // namespace

TEST_CASE("probes recover hand-set tensor-core parameters", "[study][tensor-cores]") {
  TensorCoreModel m;
  m.input = formats::binary16();
  m.output = formats::binary32();
  SECTION("8 terms, 3 extra bits, round to nearest even") {
    m.terms_per_step = 8;
    m.fraction_bits = 26;
    m.final_rounding = RoundingMode::nearest_even;
    const DetectedFeatures f = detect(m);
    CHECK(f.accumulator_fraction_bits == 23);
    CHECK(f.terms_per_step == 8);
    CHECK(f.extra_alignment_bits == 3);
    CHECK(f.final_rounding == RoundingMode::nearest_even);
    CHECK(f.subnormal_inputs == true);
  }
  SECTION("4 terms, no extra bits, truncation, subnormals flushed") {
    m.terms_per_step = 4;
    m.fraction_bits = 23;
    m.final_rounding = RoundingMode::toward_zero;
    m.subnormal_inputs = false;
    m.subnormal_outputs = false;
    const DetectedFeatures f = detect(m);
    CHECK(f.terms_per_step == 4);
    CHECK(f.extra_alignment_bits == 0);
    CHECK_FALSE(f.extra_bits_capped);
    CHECK(f.final_rounding == RoundingMode::toward_zero);
    CHECK(f.subnormal_inputs == false);
    CHECK_FALSE(f.subnormal_outputs);
  }
  SECTION("a narrow accumulator (13 fraction bits), as Ada/Hopper FP8") {
    m.input = formats::e4m3();
    m.terms_per_step = 16;
    m.fraction_bits = 25;
    m.result_fraction_bits = 13;
    m.final_rounding = RoundingMode::toward_zero;
    const DetectedFeatures f = detect(m);
    CHECK(f.accumulator_fraction_bits == 13);
    CHECK(f.terms_per_step == 16);
    CHECK(f.final_rounding == RoundingMode::toward_zero);
  }
}

TEST_CASE("tensor-cores --quick detects every fp32-output preset's features", "[study][tensor-cores]") {
  const auto dir = std::filesystem::temp_directory_path() / ("rpsim-study-tc-" + std::to_string(::getpid()));
  StudyOptions options;
  options.quick = true;
  options.out_dir = dir;
  options.config =
      StudyConfig::load(rpsim::test::source_dir() / "experiments/configs/study-tensor-cores.json", true);
  run_study(find_study("tensor-cores"), options);

  const auto det = rpsim::test::read_csv(dir / "detection.csv");
  int checked = 0;
  for (const auto& row : det.rows) {
    if (row.at("output_format") != "binary32") continue;
    INFO(row.at("preset") << " " << row.at("instruction") << " " << row.at("input_format"));
    // The probes (Fasi et al.) put C into the step they probe. Hopper's and
    // Blackwell's FP8 mma.sync run two 16-product steps from zero and add C
    // last by an IEEE addition, so the probes read one 32-product step that
    // rounds to nearest, as they would on the GPU itself (and as Khattak &
    // Mikaitis's B200 FP8 model has it).
    const auto preset =
        tensor_core_preset(row.at("preset"), format(row.at("input_format")), formats::binary32(),
                           row.at("instruction") == "default" ? "" : row.at("instruction"));
    if (preset.c_join == CJoin::after_products) {
      CHECK(row.at("model_terms_per_step") == "16");
      CHECK(row.at("terms_per_step") == "32");
      CHECK(row.at("final_rounding") == "rne");
    } else {
      CHECK(row.at("terms_per_step") == row.at("model_terms_per_step"));
      CHECK(row.at("final_rounding") == row.at("model_final_rounding"));
    }
    const int width = std::stoi(row.at("accumulator_fraction_bits"));
    CHECK(width == std::min(std::stoi(row.at("model_result_fraction_bits")),
                            std::stoi(row.at("model_fraction_bits"))));
    if (row.at("extra_bits_capped") == "false")
      CHECK(width + std::stoi(row.at("extra_alignment_bits")) == std::stoi(row.at("model_fraction_bits")));
    ++checked;
  }
  CHECK(checked >= 20);
  // The published extra alignment bits for fp16 inputs, fp32 output (Fasi et
  // al. 2021; Khattak & Mikaitis 2025): V100 0, A100 1, H100 2.
  const auto extra = [&](const std::string& gpu) {
    for (const auto& row : det.rows)
      if (row.at("preset") == gpu && row.at("instruction") == "default" &&
          row.at("input_format") == "binary16" && row.at("output_format") == "binary32")
        return std::stoi(row.at("extra_alignment_bits"));
    return -1;
  };
  CHECK(extra("v100") == 0);
  CHECK(extra("a100") == 1);
  CHECK(extra("h100") == 2);
  // The FP8 accumulator of Ada/Hopper keeps 13 fraction bits.
  bool fp8_13 = false;
  for (const auto& row : det.where("preset", "h100"))
    fp8_13 |= row.at("input_format") == "e4m3" && row.at("output_format") == "binary32" &&
              row.at("accumulator_fraction_bits") == "13";
  CHECK(fp8_13);

  const auto gemm = rpsim::test::read_csv(dir / "gemm_error.csv");
  REQUIRE(!gemm.rows.empty());
  for (const auto& row : gemm.rows) {
    CHECK(rpsim::test::number(row, "max_relative_error") >= rpsim::test::number(row, "mean_relative_error"));
    if (row.at("preset") == "none") {  // recursive fp32 summation obeys gamma_k
      INFO(row.at("model") << " k=" << row.at("k"));
      CHECK(rpsim::test::number(row, "max_relative_error") <= rpsim::test::number(row, "bound_gamma_k"));
    }
  }
  CHECK(rpsim::test::read_json(dir / "meta.json").contains("wall_time_s"));
  std::filesystem::remove_all(dir);
}
