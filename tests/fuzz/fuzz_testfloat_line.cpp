// The TestFloat vector-line parser must reject bad lines with ParseError (and
// bad operation names with FormatError), never crash, read out of bounds or
// throw anything else; a line it accepts must run through the core.
//
// Input: the first byte picks the mode. Even: byte 1 picks an operation from
// kOperations and the rest is one vector line. Odd: the rest is an operation
// name for parse_operation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/testfloat.hpp"

namespace {

const char* const kOperations[] = {
    "f16_add",     "f32_mulAdd",  "f64_to_f16", "bf16_to_f32", "e4m3_to_f32", "f32_lt_quiet",
    "e8m0_mul",    "e2m1_div",    "f16_sqrt",   "f64_eq",      "tf32_sub",    "e5m2fnuz_to_e4m3fnuz",
    "e3m2_to_f16", "f32_to_e8m0", "f64_le",     "e6m9_mulAdd",
};
constexpr std::size_t kOperationCount = sizeof(kOperations) / sizeof(kOperations[0]);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  if (data[0] & 1) {
    const std::string_view name(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
      const auto op = rpsim::testfloat::parse_operation(name);
      if (op.format == nullptr || op.result == nullptr || op.operands < 1 || op.operands > 3) std::abort();
    } catch (const rpsim::FormatError&) {
    }
    return 0;
  }
  static const auto ops = [] {
    std::vector<rpsim::testfloat::Operation> v;
    for (const char* name : kOperations) v.push_back(rpsim::testfloat::parse_operation(name));
    return v;
  }();
  const auto& op = ops[data[1] % kOperationCount];
  try {
    const auto c = rpsim::testfloat::parse_line(op, rest, "fuzz:1");
    for (int k = 0; k < op.operands; ++k)
      if (c.operand[k] & ~op.format->bit_mask()) std::abort();  // accepted an operand wider than the format
    (void)rpsim::testfloat::run(op, c, rpsim::Rounding{});
  } catch (const rpsim::testfloat::ParseError& e) {
    if (std::string_view(e.what()).find("fuzz:1") == std::string_view::npos)
      std::abort();  // must name the line
  }
  return 0;
}
