// Berkeley TestFloat vector lines: parse an operation name, run one line
// through the formats core, compare result bits and flags.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::testfloat {

enum class OpKind {
  add,
  sub,
  mul,
  div,
  sqrt,
  mul_add,
  convert,
  eq,
  le,
  lt,
  eq_signaling,
  le_quiet,
  lt_quiet
};

struct Operation {
  std::string name;  // as given: f16_add, f32_to_bf16, e4m3_to_f32, ...
  OpKind kind;
  const Format* format;  // operand format (source, for conversions)
  const Format* result;  // result format
  int operands;
  // SoftFloat shifts bf16 NaN payloads by one bit too many; for these
  // operations NaN results compare as "NaN with the same sign".
  bool loose_nan;
};

struct Case {
  std::uint64_t operand[3] = {0, 0, 0};
  std::uint64_t expected = 0;
  Flags expected_flags = 0;
};

struct Outcome {
  std::uint64_t result = 0;
  Flags flags = 0;
  bool passed = false;
};

class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// TestFloat's short names (f16 f32 f64 bf16) and every rpsim format name.
const Format& format_by_testfloat_name(std::string_view name);
Operation parse_operation(std::string_view name);  // throws FormatError
// Throws ParseError naming `where` (file:line) and the text.
Case parse_line(const Operation& op, std::string_view line, std::string_view where);
Outcome run(const Operation& op, const Case& c, const Rounding& r);

struct Summary {
  std::uint64_t passed = 0, failed = 0;
  std::vector<std::string> first_failures;  // formatted, at most `keep`
};
// Checks every line of `in`; blank lines are skipped.
Summary check_stream(const Operation& op, std::istream& in, std::string_view source, const Rounding& r,
                     std::size_t keep = 10);

}  // namespace rpsim::testfloat
