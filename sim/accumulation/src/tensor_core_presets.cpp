// Named Tensor Core presets: two constant tables (tensor_core_presets.hpp),
// each datapath row citing where its numbers come from. "KM25" is Khattak &
// Mikaitis, "Accurate Models of NVIDIA Tensor Cores", ACM TACO 2025, with its
// public MATLAB models (north-numerical-computing/MATLAB-tensor-core,
// models/*TC.m); "FHMP21" is Fasi, Higham, Mikaitis & Pranesh, "Numerical
// behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 2021. "golden" marks a
// row checked bit for bit against the measured vectors in shared/tc-golden,
// "stress" against shared/tc-stress (tests/sim/validation/test_tc_golden.cpp).
#include "rpsim/accumulation/tensor_core_presets.hpp"

#include "rpsim/accumulation/tensor_core_operands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

namespace rpsim::sim {

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return r;
}

// Whether the space-separated `list` holds `word`.
bool listed(std::string_view list, std::string_view word) {
  std::istringstream in{std::string(list)};
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

std::uint8_t input_bit(const Format& f) {
  const auto* c = tensor_core_operand_class(f);
  return c ? c->input_bit : 0;
}

std::uint8_t output_bit(const Format& f) {
  if (f.exp_bits == 8 && f.man_bits == 23) return tc_out_fp32;
  if (f.exp_bits == 5 && f.man_bits == 10) return tc_out_fp16;
  if (f.exp_bits == 11 && f.man_bits == 52) return tc_out_fp64;
  return 0;
}

// PTX's name of a block-scale format: ue8m0, ue4m3 (E4M3 read without its sign).
std::string scale_name(const Format& f) {
  return f.exp_bits == 8 && f.man_bits == 0 ? "ue8m0" : f.exp_bits == 4 && f.man_bits == 3 ? "ue4m3" : f.name;
}

std::uint8_t scale_bit(const Format& f) {
  if (f.exp_bits == 8 && f.man_bits == 0) return tc_scale_ue8m0;
  if (f.exp_bits == 4 && f.man_bits == 3) return tc_scale_ue4m3;
  return 0;
}

// 0 for a name that is no instruction (the caller's error lists the names).
std::uint8_t instruction_bit(std::string_view instr) {
  try {
    return parse_tensor_core_instruction(instr);
  } catch (const std::invalid_argument&) {
    return 0;
  }
}

// The union of a field over the rows of one preset.
template <class Field>
std::uint8_t preset_bits(std::string_view gpu, Field field) {
  std::uint8_t bits = 0;
  for (const auto& r : tensor_core_preset_rows())
    if (listed(r.gpus, gpu)) bits |= field(r);
  return bits;
}

std::string input_names(std::uint8_t bits) {
  std::vector<std::string_view> names;
  std::uint8_t named = 0;  // one name per class bit: tf32, not also xf32
  for (const auto& c : tensor_core_operand_classes())
    if ((bits & c.input_bit) &&
        (!(named & c.input_bit) || c.input_bit == tc_fp8 || c.input_bit == tc_fp8_fnuz)) {
      names.emplace_back(c.short_name);
      named |= c.input_bit;
    }
  return fmt::format("{}", fmt::join(names, " "));
}

std::string instruction_names(std::uint8_t bits) {
  std::vector<std::string_view> names;
  for (const auto& row : tensor_core_instructions())
    if (bits & row.instruction) names.emplace_back(row.name);
  return fmt::format("{}", fmt::join(names, " "));
}

// The GPUs whose rows include an instruction.
std::string gpus_with(std::uint8_t instruction) {
  std::vector<std::string> out;
  for (const auto& g : tensor_core_gpus())
    if (preset_bits(g.preset, [](const auto& r) { return r.instructions; }) & instruction)
      out.emplace_back(g.preset);
  return fmt::format("{}", fmt::join(out, " "));
}

TensorCoreModel from_row(const TensorCorePresetRow& r, std::string_view gpu, std::uint8_t ib,
                         std::string_view instr, const Format& in, const Format& out, const Format& input_b,
                         const Format* scale, int scale_block) {
  TensorCoreModel m;
  m.name = instr.empty() ? fmt::format("{} {}->{}", gpu, in.name, out.name)
                         : fmt::format("{} {} {}->{}", gpu, instr, in.name, out.name);
  m.preset = std::string(gpu);
  m.instruction = TensorCoreInstruction(ib);
  m.input = in;
  m.output = out;
  m.terms_per_step = r.terms_per_step;
  m.fraction_bits = 23 + r.extra_bits;
  m.result_fraction_bits = r.result_bits;
  m.final_rounding = r.rounding;
  m.alignment_exponent_floor = r.alignment_floor;
  m.c_join = r.c_join;
  m.terms_per_instruction = r.terms_per_instruction;
  m.step_interleave = r.step_interleave;
  m.datapath = r.datapath;
  m.zero_exponent = r.zero_exponent;
  m.two_stage = r.two_stage;
  m.subnormal_inputs = m.subnormal_outputs = r.subnormals;
  m.product_group = r.product_group;
  if (input_b != in) m.input_b = input_b;
  if (scale) {
    m.scale = *scale;
    m.scale_block = scale_block;
  }
  m.validate();
  return m;
}

// from_row, after checking the block size a block-scaled row takes.
TensorCoreModel scaled_row(const TensorCorePresetRow& r, std::string_view gpu, std::uint8_t ib,
                           std::string_view instr, const Format& in, const Format& out, const Format& input_b,
                           const Format* scale, int scale_block) {
  if (scale && (scale_block != 16 && scale_block != 32 ? true : (r.scale_blocks & scale_block) == 0)) {
    std::vector<int> blocks;
    for (const int b : {16, 32})
      if (r.scale_blocks & b) blocks.push_back(b);
    throw std::invalid_argument(
        fmt::format("tensor core preset '{}' {} {} with {} scales: scale_block {} is not {} (the "
                    "instruction's scale_vec)",
                    gpu, instr.empty() ? "mma.sync" : instr, in.name, scale_name(*scale), scale_block,
                    fmt::join(blocks, " or ")));
  }
  return from_row(r, gpu, ib, instr, in, out, input_b, scale, scale_block);
}

}  // namespace

const std::vector<std::string>& tensor_core_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& g : tensor_core_gpus()) n.emplace_back(g.preset);
    return n;
  }();
  return names;
}

std::string tensor_core_instruction_names(std::string_view preset) {
  return instruction_names(preset_bits(lower(preset), [](const auto& r) { return r.instructions; }));
}

std::string tensor_core_preset_help() {
  std::string s;
  for (const auto& g : tensor_core_gpus())
    s += fmt::format("{}{}: {}; {}; {}", s.empty() ? "" : "\n", g.preset, g.description,
                     input_names(preset_bits(g.preset, [](const auto& r) { return r.inputs; })),
                     tensor_core_instruction_names(g.preset));
  return s;
}

TensorCoreModel tensor_core_preset(std::string_view gpu_name, const Format& in, const Format& out,
                                   std::string_view instruction) {
  return tensor_core_preset(gpu_name, in, out, instruction, in, nullptr, 0);
}

TensorCoreModel tensor_core_preset(std::string_view gpu_name, const Format& in, const Format& out,
                                   std::string_view instruction, const Format& in_b, const Format* scale,
                                   int scale_block) {
  const std::string gpu = lower(gpu_name);
  const std::string instr = lower(instruction);
  if (std::none_of(tensor_core_gpus().begin(), tensor_core_gpus().end(),
                   [&](const auto& g) { return g.preset == gpu; }))
    throw std::invalid_argument(fmt::format("unknown tensor core preset '{}' (known: {})", gpu_name,
                                            fmt::join(tensor_core_preset_names(), " ")));
  const std::uint8_t ib = instruction_bit(instr), in_bit = input_bit(in), in_b_bit = input_bit(in_b),
                     out_bit = output_bit(out), sc_bit = scale ? scale_bit(*scale) : 0;
  if (!ib)
    throw std::invalid_argument(fmt::format("tensor core preset '{}': instruction '{}' is not {}", gpu,
                                            instruction, instruction_names(0xff)));
  if (!(preset_bits(gpu, [](const auto& r) { return r.instructions; }) & ib))
    throw std::invalid_argument(
        fmt::format("tensor core preset '{}': {} exists on {} only", gpu, instr, gpus_with(ib)));
  const std::uint8_t inputs = preset_bits(gpu, [](const auto& r) { return r.inputs; });
  for (const auto* f : {&in, &in_b})
    if (!(inputs & input_bit(*f)))
      throw std::invalid_argument(fmt::format("tensor core preset '{}' has no {} input (it takes {})", gpu,
                                              f->name, input_names(inputs)));
  if (!out_bit)
    throw std::invalid_argument(fmt::format(
        "tensor core preset '{}': output format must be fp32, fp16 or fp64, not '{}'", gpu, out.name));
  if (scale && !sc_bit)
    throw std::invalid_argument(fmt::format(
        "tensor core preset '{}': block scale format '{}' is not ue8m0 or ue4m3", gpu, scale->name));
  for (const auto& r : tensor_core_preset_rows())
    if (listed(r.gpus, gpu) && (r.instructions & ib) && (r.inputs & in_bit) && (r.inputs & in_b_bit) &&
        (r.outputs & out_bit) && (scale ? (r.scales & sc_bit) != 0 : r.scales == 0))
      return scaled_row(r, gpu, ib, instr, in, out, in_b, scale, scale_block);
  throw std::invalid_argument(
      fmt::format("tensor core preset '{}' has no {} {}{} -> {}{} datapath", gpu, instruction_names(ib),
                  in.name, in_b == in ? "" : " x " + in_b.name, out.name,
                  scale ? fmt::format(" with {} block scales", scale_name(*scale)) : ""));
}

TensorCoreModel tensor_core_preset(std::string_view gpu_name, const Format& in, const Format& out,
                                   TensorCoreInstruction instruction) {
  return tensor_core_preset(gpu_name, in, out, instruction, in, nullptr, 0);
}

TensorCoreModel tensor_core_preset(std::string_view gpu_name, const Format& in, const Format& out,
                                   TensorCoreInstruction instruction, const Format& in_b, const Format* scale,
                                   int scale_block) {
  // mma.sync as "": the display name of the default instruction's model omits it.
  return tensor_core_preset(gpu_name, in, out,
                            instruction == tc_mma_sync ? "" : tensor_core_instruction_name(instruction), in_b,
                            scale, scale_block);
}

// The instruction table: one row each, in bit order.
namespace {
constexpr TensorCoreInstructionRow kInstructionRows[] = {
    {tc_mma_sync, "mma.sync", "mma.sync / WMMA (every NVIDIA GPU; the default)"},
    {tc_wgmma, "wgmma", "Hopper's warpgroup MMA (sm_90a)"},
    {tc_tcgen05, "tcgen05.mma", "Blackwell's tensor-memory MMA, block-scaled forms included (sm_100)"},
    {tc_mfma, "mfma", "AMD CDNA v_mfma"},
    {tc_mfma_1k, "mfma.1k", "AMD CDNA2's bf16 _1k v_mfma"},
};
}  // namespace

std::span<const TensorCoreInstructionRow> tensor_core_instructions() {
  return kInstructionRows;
}

TensorCoreInstruction parse_tensor_core_instruction(std::string_view name) {
  const std::string n = lower(name);
  if (n.empty()) return tc_mma_sync;
  for (const auto& row : kInstructionRows)
    if (n == row.name) return row.instruction;
  throw std::invalid_argument(
      fmt::format("tensor core instruction '{}' is not {}", name, instruction_names(0xff)));
}

std::string_view tensor_core_instruction_name(TensorCoreInstruction instruction) {
  for (const auto& row : kInstructionRows)
    if (row.instruction == instruction) return row.name;
  return "?";
}

std::string preset_for_gpu_folder(std::string_view folder) {
  const std::string f = lower(folder);
  for (const auto& g : tensor_core_gpus())
    if (f == lower(g.folder)) return std::string(g.preset);
  return "";
}

std::string gpu_folder_for_preset(std::string_view preset) {
  const std::string p = lower(preset);
  for (const auto& g : tensor_core_gpus())
    if (p == g.preset) return std::string(g.folder);
  return "";
}

std::string preset_for_device(std::string_view device_name, int cc_major, int cc_minor) {
  const std::string n = lower(device_name);
  for (const auto& g : tensor_core_gpus()) {
    std::istringstream names{std::string(g.device_names)};
    std::string piece;
    while (std::getline(names, piece, ','))
      if (!piece.empty() && n.find(piece) != std::string::npos) return std::string(g.preset);
  }
  const int cc = cc_major * 10 + cc_minor;
  for (const auto& g : tensor_core_gpus())
    if (g.compute_capability != 0 && g.compute_capability == cc) return std::string(g.preset);
  return "";
}

}  // namespace rpsim::sim
