// The Tensor Core operand-class table (tensor_core_operands.hpp).
#include "rpsim/accumulation/tensor_core_operands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "rpsim/accumulation/tensor_core_presets.hpp"

namespace rpsim::sim {

namespace {

// Columns: format, short name, tc-golden folder, MMA-Sim name, input bit, bits.
constexpr TensorCoreOperandClass kClasses[] = {
    {"binary16", "fp16", "fp16", "f16", tc_fp16, 16},
    {"bfloat16", "bf16", "bf16", "bf16", tc_bf16, 16},
    {"tf32", "tf32", "tf32", "tf32", tc_tf32, 19},
    {"tf32", "xf32", "", "xf32", tc_tf32, 19},  // AMD CDNA3's xf32: tf32's values
    {"binary32", "fp32", "", "f32", tc_fp32, 32},
    {"binary64", "fp64", "", "f64", tc_fp64, 64},
    {"e4m3", "e4m3", "E4M3", "e4m3", tc_fp8, 8},
    {"e5m2", "e5m2", "E5M2", "e5m2", tc_fp8, 8},
    {"e4m3fnuz", "fp8", "", "fp8", tc_fp8_fnuz, 8},  // AMD CDNA3 fp8
    {"e5m2fnuz", "bf8", "", "bf8", tc_fp8_fnuz, 8},  // AMD CDNA3 bf8
    {"e2m1", "e2m1", "", "e2m1", tc_fp4, 4},
};

bool same_lower(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

}  // namespace

std::span<const TensorCoreOperandClass> tensor_core_operand_classes() {
  return kClasses;
}

const TensorCoreOperandClass* tensor_core_operand_class(const Format& f) {
  static const std::vector<Format> formats = [] {
    std::vector<Format> v;
    for (const auto& c : kClasses) v.push_back(parse_format(c.format));
    return v;
  }();
  for (std::size_t i = 0; i < formats.size(); ++i)
    if (f == formats[i]) return &kClasses[i];
  return nullptr;
}

const TensorCoreOperandClass* tensor_core_operand_class_by_folder(std::string_view golden_folder) {
  for (const auto& c : kClasses)
    if (!c.golden_folder.empty() && same_lower(c.golden_folder, golden_folder)) return &c;
  return nullptr;
}

const TensorCoreOperandClass* tensor_core_operand_class_by_mma_sim(std::string_view name) {
  for (const auto& c : kClasses)
    if (!c.mma_sim.empty() && c.mma_sim == name) return &c;
  return nullptr;
}

std::string tensor_core_operand_names() {
  std::vector<std::string_view> names;
  for (const auto& c : kClasses) names.push_back(c.short_name);
  return fmt::format("{}", fmt::join(names, " "));
}

}  // namespace rpsim::sim
