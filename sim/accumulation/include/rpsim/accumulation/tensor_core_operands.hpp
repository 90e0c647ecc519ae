// Tensor Core operand classes: the one table that says which class a format
// belongs to (fp16 / bf16 / tf32 / E4M3 ...), with the names each front end
// writes it by. Preset rows (tensor_core_presets.hpp), kernel presets, golden
// data folders, gpu-validate and the MMA-Sim reader all look formats up here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "rpsim/formats/format.hpp"

namespace rpsim::sim {

struct TensorCoreOperandClass {
  std::string_view format;         // rpsim's format (parse_format): "binary16"
  std::string_view short_name;     // as labels and help write it: "fp16"
  std::string_view golden_folder;  // input folder of shared/tc-golden: "fp16", "E4M3"; "": none
  std::string_view mma_sim;        // format name in shared/mma-sim headers: "f16"; "": none
  std::uint8_t input_bit;          // TensorCoreInput bit of the preset rows
  int bits;                        // encoding width
};

// Every class, in table order (one format may have several rows: tf32 is also
// AMD's xf32; the first row of a format is its class).
std::span<const TensorCoreOperandClass> tensor_core_operand_classes();
// The class of a format (format equality, so "fp16" and "binary16" are one),
// or nullptr when the format is no Tensor Core operand.
const TensorCoreOperandClass* tensor_core_operand_class(const Format& f);
// The class with this tc-golden folder name (case-insensitive), or nullptr.
const TensorCoreOperandClass* tensor_core_operand_class_by_folder(std::string_view golden_folder);
// The class with this MMA-Sim header name, or nullptr.
const TensorCoreOperandClass* tensor_core_operand_class_by_mma_sim(std::string_view name);
// The classes' short names, space separated, for error messages.
std::string tensor_core_operand_names();

}  // namespace rpsim::sim
