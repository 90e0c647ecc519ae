// The rows of the Tensor Core presets (tensor_core_presets.hpp): one row per
// GPU, and one per GPU and instruction listing its datapaths by name. The
// datapaths, each citing where its numbers come from, are named constants in
// tensor_core_datapaths.hpp (measured) and tensor_core_datapaths_mmasim.hpp
// (MMA-Sim); GPUs that share one reference the same constant.
#include "rpsim/accumulation/tensor_core_presets.hpp"

#include <span>
#include <vector>

#include "tensor_core_datapaths.hpp"
#include "tensor_core_datapaths_mmasim.hpp"

namespace rpsim::sim {

namespace {

using namespace tc_detail;

// The device lookup tries the rows in order; no row's name piece occurs in
// another GPU's device name ("a2" is not in "NVIDIA A30"). A device
// whose name matches none (GeForce and RTX cards) is found by its compute
// capability.
constexpr TensorCoreGpu kGpus[] = {
    {"v100", "V100", "v100", 70, "NVIDIA V100 (Volta, sm_70)"},
    {"t4", "T4", "t4", 75, "NVIDIA T4 (Turing, sm_75)"},
    {"a100", "A100", "a100", 80, "NVIDIA A100 (Ampere, sm_80)"},
    {"a2", "A2", "a2", 0, "NVIDIA A2 (Ampere, sm_86)"},
    {"a30", "A30", "a30", 0, "NVIDIA A30 (Ampere, sm_80)"},
    {"ada", "Ada", "", 89, "Ada Lovelace (sm_89)"},
    {"l40s", "L40S", "l40s", 0, "NVIDIA L40S (Ada Lovelace, sm_89)"},
    {"h100", "H100", "h100", 90, "NVIDIA H100 (Hopper, sm_90)"},
    {"h200", "H200", "h200", 0, "NVIDIA H200 (Hopper, sm_90)"},
    {"b200", "B200", "b200", 100, "NVIDIA B200 (Blackwell, sm_100)"},
    {"rtx5090", "RTX5090", "rtx 50,rtx pro 6000", 120, "NVIDIA RTX Blackwell (GeForce RTX 50, sm_120)"},
    {"mi100", "MI100", "", 0, "AMD Instinct MI100 (CDNA1)"},
    {"mi250", "MI250", "", 0, "AMD Instinct MI250 (CDNA2)"},
    {"mi300", "MI300", "", 0, "AMD Instinct MI300 (CDNA3)"},
};

// One GPU and one instruction: the datapaths it has, in lookup order (the
// first that takes the formats is used; no two take the same ones). A new
// GPU preset is a kGpus row plus its rows here.
struct GpuInstruction {
  std::string_view gpu;
  std::uint8_t instruction;  // one TensorCoreInstruction bit
  std::span<const TensorCorePresetRow* const> datapaths;
};

// The datapath lists GPUs share.
constexpr const TensorCorePresetRow* kVoltaMmaSync[] = {&kVoltaFp16ToF32, &kVoltaFp16ToF16};
constexpr const TensorCorePresetRow* kTuringMmaSync[] = {&kTuringFp16ToF32, &kTuringFp16ToF16};
constexpr const TensorCorePresetRow* kAmpereMmaSync[] = {&kAmpereAdaFp16Bf16ToF32, &kAmpereAdaFp16Bf16ToF16,
                                                         &kAmpereAdaTf32ToF32, &kAmpereAdaTf32ToF16,
                                                         &kFp64FmaChain};
constexpr const TensorCorePresetRow* kAdaMmaSync[] = {&kAmpereAdaFp16Bf16ToF32,
                                                      &kAmpereAdaFp16Bf16ToF16,
                                                      &kAmpereAdaTf32ToF32,
                                                      &kAmpereAdaTf32ToF16,
                                                      &kAdaFp8ToF32,
                                                      &kAdaFp8ToF16,
                                                      &kFp64FmaChain};
constexpr const TensorCorePresetRow* kHopperMmaSync[] = {&kHopperBlackwellFp16Bf16ToF32,
                                                         &kHopperFp16Bf16ToF16,
                                                         &kHopperBlackwellTf32ToF32,
                                                         &kHopperTf32ToF16,
                                                         &kHopperBlackwellFp8ToF32,
                                                         &kHopperFp8ToF16,
                                                         &kFp64FmaChain};
constexpr const TensorCorePresetRow* kHopperWgmma[] = {&kHopperBlackwellFp16Bf16ToF32, &kHopperFp16Bf16ToF16,
                                                       &kHopperBlackwellTf32ToF32,     &kHopperTf32ToF16,
                                                       &kHopperFp8ToF32Wgmma,          &kHopperFp8ToF16Wgmma};
constexpr const TensorCorePresetRow* kBlackwellMmaSync[] = {&kHopperBlackwellFp16Bf16ToF32,
                                                            &kBlackwellFp16Bf16ToF16,
                                                            &kHopperBlackwellTf32ToF32,
                                                            &kBlackwellTf32ToF16,
                                                            &kHopperBlackwellFp8ToF32,
                                                            &kBlackwellFp8ToF16,
                                                            &kFp64FmaChain};
// tcgen05.mma on B200 and RTX Blackwell's mma.sync: one datapath list
// (tensor_core_datapaths_mmasim.hpp, kBlackwell25*); sm_120's mma.sync also
// has FP64.
constexpr const TensorCorePresetRow* kBlackwellTcgen05[] = {
    &kBlackwell25Fp16Bf16ToF32,      &kBlackwell25Fp16Bf16ToF16, &kBlackwell25Tf32ToF32,
    &kBlackwell25Fp8ToF32,           &kBlackwell25Fp8ToF16,      &kBlackwell25Fp8ToF32Mx,
    &kBlackwell25Fp4ToF32BlockScaled};
constexpr const TensorCorePresetRow* kRtxBlackwellMmaSync[] = {
    &kFp64FmaChain,          &kBlackwell25Fp16Bf16ToF32,      &kBlackwell25Fp16Bf16ToF16,
    &kBlackwell25Tf32ToF32,  &kBlackwell25Fp8ToF32,           &kBlackwell25Fp8ToF16,
    &kBlackwell25Fp8ToF32Mx, &kBlackwell25Fp4ToF32BlockScaled};
constexpr const TensorCorePresetRow* kCdna1Mfma[] = {&kCdna123Fp32ToF32Mfma, &kCdna1Fp16ToF32Mfma,
                                                     &kCdna1Bf16ToF32Mfma};
constexpr const TensorCorePresetRow* kCdna2Mfma[] = {&kCdna123Fp32ToF32Mfma, &kFp64FmaChain,
                                                     &kCdna2Fp16ToF32Mfma, &kCdna2Bf16ToF32Mfma};
constexpr const TensorCorePresetRow* kCdna2Mfma1k[] = {&kCdna2Bf16ToF32Mfma1k};
constexpr const TensorCorePresetRow* kCdna3Mfma[] = {&kCdna123Fp32ToF32Mfma, &kFp64FmaChain,
                                                     &kCdna3Fp16Bf16ToF32Mfma, &kCdna3Tf32ToF32Mfma,
                                                     &kCdna3Fp8FnuzToF32Mfma};

constexpr GpuInstruction kRows[] = {
    {.gpu = "v100", .instruction = tc_mma_sync, .datapaths = kVoltaMmaSync},
    {.gpu = "t4", .instruction = tc_mma_sync, .datapaths = kTuringMmaSync},
    {.gpu = "a100", .instruction = tc_mma_sync, .datapaths = kAmpereMmaSync},
    {.gpu = "a2", .instruction = tc_mma_sync, .datapaths = kAmpereMmaSync},
    {.gpu = "a30", .instruction = tc_mma_sync, .datapaths = kAmpereMmaSync},
    {.gpu = "ada", .instruction = tc_mma_sync, .datapaths = kAdaMmaSync},
    {.gpu = "l40s", .instruction = tc_mma_sync, .datapaths = kAdaMmaSync},
    {.gpu = "h100", .instruction = tc_mma_sync, .datapaths = kHopperMmaSync},
    {.gpu = "h100", .instruction = tc_wgmma, .datapaths = kHopperWgmma},
    {.gpu = "h200", .instruction = tc_mma_sync, .datapaths = kHopperMmaSync},
    {.gpu = "h200", .instruction = tc_wgmma, .datapaths = kHopperWgmma},
    {.gpu = "b200", .instruction = tc_mma_sync, .datapaths = kBlackwellMmaSync},
    {.gpu = "b200", .instruction = tc_tcgen05, .datapaths = kBlackwellTcgen05},
    {.gpu = "rtx5090", .instruction = tc_mma_sync, .datapaths = kRtxBlackwellMmaSync},
    {.gpu = "mi100", .instruction = tc_mfma, .datapaths = kCdna1Mfma},
    {.gpu = "mi250", .instruction = tc_mfma, .datapaths = kCdna2Mfma},
    {.gpu = "mi250", .instruction = tc_mfma_1k, .datapaths = kCdna2Mfma1k},
    {.gpu = "mi300", .instruction = tc_mfma, .datapaths = kCdna3Mfma},
};

}  // namespace

std::span<const TensorCoreGpu> tensor_core_gpus() {
  return kGpus;
}

std::span<const TensorCorePresetRow> tensor_core_preset_rows() {
  // One lookup row per GPU, instruction and datapath.
  static const std::vector<TensorCorePresetRow> rows = [] {
    std::vector<TensorCorePresetRow> r;
    for (const GpuInstruction& g : kRows)
      for (const TensorCorePresetRow* datapath : g.datapaths) {
        TensorCorePresetRow row = *datapath;
        row.gpus = g.gpu;
        row.instructions = g.instruction;
        r.push_back(row);
      }
    return r;
  }();
  return rows;
}

}  // namespace rpsim::sim
