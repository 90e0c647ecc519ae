#include "rpsim/formats/testfloat.hpp"

#include <fmt/format.h>

#include <istream>

#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim::testfloat {
namespace {

struct Named {
  std::string_view name;
  OpKind kind;
  int operands;
};
constexpr Named kOps[] = {
    {"add", OpKind::add, 2},
    {"sub", OpKind::sub, 2},
    {"mul", OpKind::mul, 2},
    {"div", OpKind::div, 2},
    {"sqrt", OpKind::sqrt, 1},
    {"mulAdd", OpKind::mul_add, 3},
    {"eq", OpKind::eq, 2},
    {"le", OpKind::le, 2},
    {"lt", OpKind::lt, 2},
    {"eq_signaling", OpKind::eq_signaling, 2},
    {"le_quiet", OpKind::le_quiet, 2},
    {"lt_quiet", OpKind::lt_quiet, 2},
};

bool is_compare(OpKind k) {
  return k >= OpKind::eq;
}

bool parse_hex(std::string_view s, std::uint64_t& v) {
  if (s.empty() || s.size() > 16) return false;
  v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return false;
    v = v << 4 | std::uint64_t(d);
  }
  return true;
}

}  // namespace

const Format& format_by_testfloat_name(std::string_view name) {
  if (name == "f16") return formats::binary16();
  if (name == "f32") return formats::binary32();
  if (name == "f64") return formats::binary64();
  if (name == "bf16") return formats::bfloat16();
  return format(name);
}

Operation parse_operation(std::string_view name) {
  const std::string quoted = "operation '" + std::string(name) + "': ";
  const auto to = name.find("_to_");
  Operation op;
  op.name = std::string(name);
  try {
    if (to != std::string_view::npos) {
      op.kind = OpKind::convert;
      op.format = &format_by_testfloat_name(name.substr(0, to));
      op.result = &format_by_testfloat_name(name.substr(to + 4));
      op.operands = 1;
    } else {
      const auto us = name.find('_');
      if (us == std::string_view::npos)
        throw FormatError(quoted + "expected FORMAT_OP (f16_add) or FROM_to_TO (f32_to_f16)");
      const std::string_view opname = name.substr(us + 1);
      const Named* found = nullptr;
      for (const Named& n : kOps)
        if (n.name == opname) found = &n;
      if (!found)
        throw FormatError(quoted + "unknown operation '" + std::string(opname) +
                          "' (add sub mul div sqrt mulAdd eq le lt eq_signaling le_quiet lt_quiet)");
      op.kind = found->kind;
      op.operands = found->operands;
      op.format = op.result = &format_by_testfloat_name(name.substr(0, us));
    }
  } catch (const FormatError& e) {
    const std::string what = e.what();
    if (what.rfind("operation", 0) == 0) throw;
    throw FormatError(quoted + what);
  }
  op.loose_nan = op.kind == OpKind::convert &&
                 (op.format == &formats::bfloat16() || op.result == &formats::bfloat16()) &&
                 (op.format == &formats::binary32() || op.result == &formats::binary32());
  return op;
}

Case parse_line(const Operation& op, std::string_view line, std::string_view where) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) fields.push_back(line.substr(i, j - i));
    i = j;
  }
  auto fail = [&](const std::string& why) -> ParseError {
    return ParseError(fmt::format("{}: {}: '{}'", where, why, line));
  };
  const std::size_t want = std::size_t(op.operands) + 2;
  if (fields.size() != want)
    throw fail(fmt::format("expected {} fields for {}, found {}", want, op.name, fields.size()));
  Case c;
  for (int k = 0; k < op.operands; ++k) {
    if (!parse_hex(fields[k], c.operand[k]) || (c.operand[k] & ~op.format->bit_mask()))
      throw fail(
          fmt::format("operand {} '{}' is not a {}-bit hex pattern", k + 1, fields[k], op.format->bits));
  }
  const std::uint64_t result_mask = is_compare(op.kind) ? 1 : op.result->bit_mask();
  if (!parse_hex(fields[op.operands], c.expected) || (c.expected & ~result_mask))
    throw fail(fmt::format("result '{}' is not a valid {} pattern", fields[op.operands],
                           is_compare(op.kind) ? "0/1" : op.result->name));
  std::uint64_t flags;
  if (!parse_hex(fields[op.operands + 1], flags) || flags > 0x1F)
    throw fail(fmt::format("flags '{}' are not two hex digits <= 1F", fields[op.operands + 1]));
  c.expected_flags = Flags(flags);
  return c;
}

Outcome run(const Operation& op, const Case& c, const Rounding& r) {
  Outcome o;
  const Format& f = *op.format;
  const auto* a = c.operand;
  switch (op.kind) {
    case OpKind::add: o.result = add(f, a[0], a[1], r, o.flags); break;
    case OpKind::sub: o.result = sub(f, a[0], a[1], r, o.flags); break;
    case OpKind::mul: o.result = mul(f, a[0], a[1], r, o.flags); break;
    case OpKind::div: o.result = div(f, a[0], a[1], r, o.flags); break;
    case OpKind::sqrt: o.result = sqrt(f, a[0], r, o.flags); break;
    case OpKind::mul_add: o.result = fma(f, a[0], a[1], a[2], r, o.flags); break;
    case OpKind::convert: o.result = convert(*op.result, f, a[0], r, o.flags); break;
    case OpKind::eq: o.result = eq(f, a[0], a[1], o.flags); break;
    case OpKind::le: o.result = le(f, a[0], a[1], o.flags); break;
    case OpKind::lt: o.result = lt(f, a[0], a[1], o.flags); break;
    case OpKind::eq_signaling: o.result = eq_signaling(f, a[0], a[1], o.flags); break;
    case OpKind::le_quiet: o.result = le_quiet(f, a[0], a[1], o.flags); break;
    case OpKind::lt_quiet: o.result = lt_quiet(f, a[0], a[1], o.flags); break;
  }
  bool same = o.result == c.expected;
  if (!same && op.loose_nan && is_nan(*op.result, o.result) && is_nan(*op.result, c.expected))
    same = (o.result & op.result->sign_bit()) == (c.expected & op.result->sign_bit());
  o.passed = same && o.flags == c.expected_flags;
  return o;
}

Summary check_stream(const Operation& op, std::istream& in, std::string_view source, const Rounding& r,
                     std::size_t keep) {
  Summary s;
  std::string line;
  std::uint64_t lineno = 0;
  const int width = (op.format->bits + 3) / 4;
  const int rwidth = is_compare(op.kind) ? 1 : (op.result->bits + 3) / 4;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Case c = parse_line(op, line, fmt::format("{}:{}", source, lineno));
    const Outcome o = run(op, c, r);
    if (o.passed) {
      ++s.passed;
      continue;
    }
    ++s.failed;
    if (s.first_failures.size() < keep) {
      std::string ops;
      for (int k = 0; k < op.operands; ++k) ops += fmt::format("{:0{}X} ", c.operand[k], width);
      s.first_failures.push_back(
          fmt::format("{}:{}: {}-> expected {:0{}X} flags {:02X}, got {:0{}X} flags {:02X}", source, lineno,
                      ops, c.expected, rwidth, c.expected_flags, o.result, rwidth, o.flags));
    }
  }
  return s;
}

}  // namespace rpsim::testfloat
