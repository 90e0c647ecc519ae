// The GPU-preset tables: every row builds the model it says, rows never
// overlap, and names, errors, help text, folder names and the device lookup
// all come from the tables.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <tuple>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/formats/format.hpp"

using namespace rpsim;
using namespace rpsim::sim;

namespace {

std::vector<std::string> words(std::string_view list) {
  std::vector<std::string> out;
  std::string w;
  for (char ch : std::string(list) + " ") {
    if (ch != ' ') {
      w += ch;
    } else if (!w.empty()) {
      out.push_back(w);
      w.clear();
    }
  }
  return out;
}

const std::vector<std::pair<std::uint8_t, const Format*>> kInputs = {{tc_fp16, &formats::binary16()},
                                                                     {tc_bf16, &formats::bfloat16()},
                                                                     {tc_tf32, &formats::tf32()},
                                                                     {tc_fp8, &formats::e4m3()},
                                                                     {tc_fp8, &formats::e5m2()}};
const std::vector<std::pair<std::uint8_t, const Format*>> kOutputs = {{tc_out_fp32, &formats::binary32()},
                                                                      {tc_out_fp16, &formats::binary16()}};
const std::vector<std::pair<std::uint8_t, const char*>> kInstructions = {{tc_mma_sync, "mma.sync"},
                                                                         {tc_wgmma, "wgmma"}};

}  // namespace

TEST_CASE("tensor core presets: every row builds its model and no two rows cover one datapath",
          "[tc][preset]") {
  std::set<std::tuple<std::string, std::string, std::string, std::string>> seen;
  std::size_t models = 0;
  for (const TensorCorePresetRow& row : tensor_core_preset_rows()) {
    INFO("row " << row.gpus << ": " << row.citation);
    CHECK(!row.citation.empty());
    if (row.scales != 0) continue;  // block-scaled rows: test_tensor_core_paths.cpp
    for (const auto& gpu : words(row.gpus))
      for (auto [ib, instr] : kInstructions)
        for (auto [inb, in] : kInputs)
          for (auto [ob, out] : kOutputs) {
            if (!(row.instructions & ib) || !(row.inputs & inb) || !(row.outputs & ob)) continue;
            CHECK(seen.insert({gpu, instr, in->name, out->name}).second);
            const TensorCoreModel m = tensor_core_preset(gpu, *in, *out, instr);
            ++models;
            CHECK(m.preset == gpu);
            CHECK(m.instruction == ib);
            CHECK(tensor_core_instruction_name(m.instruction) == instr);
            CHECK(m.terms_per_step == row.terms_per_step);
            CHECK(m.fraction_bits == 23 + row.extra_bits);
            CHECK(m.result_fraction_bits == row.result_bits);
            CHECK(m.final_rounding == row.rounding);
            CHECK(m.alignment_exponent_floor == row.alignment_floor);
            CHECK(m.c_join == row.c_join);
            CHECK(m.terms_per_instruction == row.terms_per_instruction);
            CHECK(m.step_interleave == row.step_interleave);
            // The default instruction is mma.sync.
            if (ib == tc_mma_sync) CHECK(tensor_core_preset(gpu, *in, *out).fraction_bits == m.fraction_bits);
          }
  }
  CHECK(models == seen.size());
  CHECK(models >= 90);  // 92 datapaths today: the loops ran
}

TEST_CASE("tensor core presets: every GPU row has datapaths, every datapath a GPU row", "[tc][preset]") {
  std::set<std::string> gpus;
  for (const TensorCoreGpu& g : tensor_core_gpus()) {
    CHECK(gpus.insert(std::string(g.preset)).second);
    CHECK(preset_for_gpu_folder(g.folder) == g.preset);
    CHECK(gpu_folder_for_preset(g.preset) == g.folder);
    const std::string instr = tensor_core_instruction_names(g.preset);
    CHECK_NOTHROW(tensor_core_preset(g.preset, formats::binary16(), formats::binary32(),
                                     instr.substr(0, instr.find(' '))));
  }
  for (const TensorCorePresetRow& row : tensor_core_preset_rows())
    for (const auto& gpu : words(row.gpus)) CHECK(gpus.count(gpu) == 1);
  const std::vector<std::string> names(gpus.begin(), gpus.end());
  CHECK(tensor_core_preset_names().size() == names.size());
  CHECK(tensor_core_preset_names().front() == "v100");
  CHECK(preset_for_gpu_folder("h100") == "h100");  // case-insensitive
  CHECK(preset_for_gpu_folder("RTX") == "");
  CHECK(gpu_folder_for_preset("x900") == "");
  const std::string help = tensor_core_preset_help();
  for (const auto& n : tensor_core_preset_names()) CHECK_THAT(help, Catch::Contains(n + ": "));
  CHECK_THAT(help, Catch::Contains(
                       "h100: NVIDIA H100 (Hopper, sm_90); fp16 bf16 tf32 fp64 e4m3 e5m2; mma.sync wgmma"));
  CHECK_THAT(help,
             Catch::Contains("mi300: AMD Instinct MI300 (CDNA3); fp16 bf16 tf32 fp32 fp64 fp8 bf8; mfma"));
  CHECK(tensor_core_instruction_names("a100") == "mma.sync");
}

TEST_CASE("tensor core presets: errors list what the table has", "[tc][preset]") {
  const Format &fp16 = formats::binary16(), &fp32 = formats::binary32();
  CHECK_THROWS_WITH(
      tensor_core_preset("x900", fp16, fp32),
      Catch::Contains("x900") && Catch::Contains("v100 t4 a100 a2 a30 ada l40s h100 h200 b200"));
  CHECK_THROWS_WITH(tensor_core_preset("v100", formats::bfloat16(), fp32),
                    Catch::Contains("v100") && Catch::Contains("bfloat16") && Catch::Contains("takes fp16"));
  CHECK_THROWS_WITH(tensor_core_preset("a100", formats::e4m3(), fp32),
                    Catch::Contains("e4m3") && Catch::Contains("fp16 bf16 tf32"));
  CHECK_THROWS_WITH(tensor_core_preset("a100", fp16, fp32, "wgmma"),
                    Catch::Contains("wgmma") && Catch::Contains("h100 h200"));
  CHECK_THROWS_WITH(tensor_core_preset("h100", fp16, fp32, "hmma"), Catch::Contains("hmma"));
  CHECK_THROWS_WITH(tensor_core_preset("h100", fp16, formats::bfloat16()), Catch::Contains("output"));
}

TEST_CASE("tensor core presets: a CUDA device name or compute capability picks the preset", "[tc][preset]") {
  CHECK(preset_for_device("NVIDIA H100 80GB HBM3", 9, 0) == "h100");
  CHECK(preset_for_device("NVIDIA H200", 9, 0) == "h200");
  CHECK(preset_for_device("NVIDIA A100-SXM4-40GB", 8, 0) == "a100");
  CHECK(preset_for_device("NVIDIA A30", 8, 0) == "a30");
  CHECK(preset_for_device("NVIDIA A2", 8, 6) == "a2");
  CHECK(preset_for_device("NVIDIA L40S", 8, 9) == "l40s");
  CHECK(preset_for_device("NVIDIA GeForce RTX 4090", 8, 9) == "ada");
  CHECK(preset_for_device("Tesla V100-SXM2-16GB", 7, 0) == "v100");
  CHECK(preset_for_device("NVIDIA B200", 10, 0) == "b200");
  CHECK(preset_for_device("Unknown", 9, 0) == "h100");
  CHECK(preset_for_device("Unknown", 6, 1).empty());
}

TEST_CASE("tensor core presets: spec() reads the preset and instruction fields, never the display name",
          "[tc][preset]") {
  auto model = AccumulationModel::parse("tc:h200:e5m2:fp32:wgmma:terms_per_step=16");
  auto tc = *model.bare_instruction();
  CHECK(tc.preset == "h200");
  CHECK(tc.instruction == tc_wgmma);
  tc.name = "renamed for display";
  CHECK(AccumulationModel(tc).spec() == "tc:h200:e5m2:binary32:wgmma:terms_per_step=16");
  // The same fields under mma.sync: the spec names no wgmma and lists what
  // differs from the mma.sync preset, and reads back to the same fields.
  tc.instruction = tc_mma_sync;
  const std::string spec = AccumulationModel(tc).spec();
  CHECK_THAT(spec, Catch::StartsWith("tc:h200:e5m2:binary32:") && !Catch::Contains("wgmma"));
  CHECK_THAT(spec, Catch::Contains("fraction_bits=13"));
  CHECK(AccumulationModel::parse(spec).spec() == spec);
}

TEST_CASE("tensor core presets: the instruction is a row of one table, where '' and mma.sync are one",
          "[tc][preset]") {
  CHECK(parse_tensor_core_instruction("") == tc_mma_sync);
  CHECK(parse_tensor_core_instruction("mma.sync") == tc_mma_sync);
  CHECK(parse_tensor_core_instruction("WGMMA") == tc_wgmma);
  for (const auto& row : tensor_core_instructions()) {
    CHECK(parse_tensor_core_instruction(row.name) == row.instruction);
    CHECK(tensor_core_instruction_name(row.instruction) == row.name);
  }
  CHECK_THROWS_WITH(parse_tensor_core_instruction("mma"),
                    Catch::Contains("'mma'") && Catch::Contains("mma.sync wgmma tcgen05.mma mfma mfma.1k"));
  // The model says which row it came from, however the caller spelled mma.sync.
  const Format& fp16 = formats::binary16();
  const Format& fp32 = formats::binary32();
  CHECK(tensor_core_preset("h100", fp16, fp32).instruction == tc_mma_sync);
  CHECK(tensor_core_preset("h100", fp16, fp32, "mma.sync").instruction == tc_mma_sync);
  CHECK(tensor_core_preset("h100", fp16, fp32, tc_wgmma).instruction == tc_wgmma);
}

TEST_CASE("tensor core presets: datapaths with the same numbers are one constant (one citation)",
          "[tc][preset]") {
  // Twin datapaths written out twice drift apart; the table's rule is that
  // GPUs sharing a datapath name one constant, so equal fields mean equal
  // citations (RTX Blackwell's mma.sync and B200's tcgen05.mma were twins).
  auto fields = [](const TensorCorePresetRow& r) {
    return std::tuple(r.inputs, r.outputs, r.terms_per_step, r.extra_bits, r.result_bits, r.rounding,
                      r.alignment_floor, r.c_join, r.terms_per_instruction, r.step_interleave, r.datapath,
                      r.zero_exponent, r.two_stage, r.subnormals, r.scales, r.product_group, r.scale_blocks);
  };
  const auto rows = tensor_core_preset_rows();
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = i + 1; j < rows.size(); ++j)
      if (fields(rows[i]) == fields(rows[j])) {
        INFO(rows[i].gpus << " and " << rows[j].gpus << ": " << rows[i].citation << " / "
                          << rows[j].citation);
        CHECK(rows[i].citation == rows[j].citation);
      }
}
