// Spec strings and JSON of kernel schedules and kernel presets
// (accumulation_spec.hpp, kernel_schedule.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "accumulation_spec.hpp"

namespace rpsim::sim::spec_detail {

namespace {

std::string field_names() {
  std::vector<std::string> names{"accumulator", "input_b"};
  for (const auto& f : schedule_fields()) names.emplace_back(f.name);
  return fmt::format("{} {}", fmt::join(names, " "), tc_field_names());
}

// The schedule the positional parts alone give: the instruction preset with
// a binary32 (or `accumulator`) output, A and B in its input format, every
// other field its default.
KernelSchedule base_schedule(const std::string& gpu, const Format& in, const Format& out,
                             TensorCoreInstruction instr, const Format& accumulator, const Format& in_b) {
  KernelSchedule s;
  s.gpu = gpu;
  s.instruction_kind = instr;
  s.instruction = tensor_core_preset(gpu, in, accumulator, instr, in_b, nullptr, 0);
  s.stored = in;
  s.output = out;
  return s;
}

}  // namespace

KernelSchedule parse_kernel(std::string_view spec, const std::vector<std::string>& parts) {
  try {
    const std::size_t positional = positional_parts(parts);
    if (positional < 4) bad(spec, "kernel needs GPU:IN:OUT, e.g. kernel:h100:fp16:fp32:split_k=3");
    if (positional > 5) bad(spec, fmt::format("unexpected '{}'", parts[5]));
    Format accumulator = formats::binary32();
    const Format in = parse_fmt(spec, parts[2]);
    Format in_b = in;  // input_b: B's format (mixed FP8 pairs, e4m3 x e5m2)
    for (std::size_t i = positional; i < parts.size(); ++i) {
      if (parts[i].starts_with("accumulator=")) accumulator = parse_fmt(spec, parts[i].substr(12));
      if (parts[i].starts_with("input_b=")) in_b = parse_fmt(spec, parts[i].substr(8));
    }
    KernelSchedule s =
        base_schedule(parts[1], in, parse_fmt(spec, parts[3]),
                      parse_tensor_core_instruction(positional > 4 ? parts[4] : ""), accumulator, in_b);
    for (std::size_t i = positional; i < parts.size(); ++i) {
      const auto eq = parts[i].find('=');
      const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
      if (key == "accumulator" || key == "input_b") continue;
      if (const ScheduleField* f = find_schedule_field(key)) {
        f->set(s, value);
      } else if (const TcField* t = find_tc_field(key)) {
        t->set(s.instruction, value);
      } else {
        throw std::invalid_argument(
            fmt::format("'{}' is not a kernel schedule field ({})", key, field_names()));
      }
    }
    s.validate();
    return s;
  } catch (const AccumulationSpecError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    bad(spec, e.what());
  }
}

std::string kernel_spec(const KernelSchedule& s) {
  const TensorCoreModel& m = s.instruction;
  std::string out = fmt::format("kernel:{}:{}:{}{}", s.gpu, m.input.name, s.output.name,
                                s.instruction_kind == tc_mma_sync
                                    ? ""
                                    : fmt::format(":{}", tensor_core_instruction_name(s.instruction_kind)));
  if (m.output != formats::binary32()) out += fmt::format(":accumulator={}", m.output.name);
  if (m.input_b) out += fmt::format(":input_b={}", m.input_b->name);
  const KernelSchedule base =
      base_schedule(s.gpu, m.input, s.output, s.instruction_kind, m.output, m.b_input());
  for (const auto& f : schedule_fields())
    if (f.get(s) != f.get(base)) out += fmt::format(":{}={}", f.name, f.get(s));
  for (const auto& f : tc_fields())
    if (f.get(m) != f.get(base.instruction)) out += fmt::format(":{}={}", f.name, f.get(m));
  return out;
}

bool is_kernel_preset_library(std::string_view lib) {
  for (const auto& r : kernel_presets())
    if (std::string_view(r.name).starts_with(lib) && r.name[lib.size()] == ':') return true;
  return false;
}

KernelPreset parse_kernel_preset(std::string_view spec, const std::vector<std::string>& parts) {
  const std::string name = parts[0] + ":" + (parts.size() > 1 ? parts[1] : "");
  bool known = false;
  for (const auto& r : kernel_presets()) known = known || name == r.name;
  if (!known) bad(spec, fmt::format("unknown kernel preset '{}' (known: {})", name, kernel_preset_names()));
  try {
    const std::size_t positional = positional_parts(parts);
    if (positional != 4)
      bad(spec, fmt::format("{} takes IN:OUT[:rpr=0|1][:input_b=FMT][:fast_accum=0|1][:scales=tensor|row], "
                            "e.g. {}:fp16:fp32",
                            name, name));
    int rpr = 0;
    bool fast = false, row = false;
    std::optional<Format> in_b;
    for (std::size_t i = positional; i < parts.size(); ++i) {
      if (parts[i] == "rpr=0" || parts[i] == "rpr=1") {
        rpr = parts[i].back() - '0';
      } else if (parts[i] == "fast_accum=0" || parts[i] == "fast_accum=1") {
        fast = parts[i].back() == '1';
      } else if (parts[i] == "scales=tensor" || parts[i] == "scales=row") {
        row = parts[i] == "scales=row";
      } else if (parts[i].starts_with("input_b=")) {
        in_b = parse_fmt(spec, parts[i].substr(8));
      } else {
        bad(spec,
            fmt::format("'{}' is not rpr=0|1, input_b=FMT, fast_accum=0|1 or scales=tensor|row", parts[i]));
      }
    }
    return kernel_preset(name, parse_fmt(spec, parts[2]), parse_fmt(spec, parts[3]), rpr,
                         in_b ? &*in_b : nullptr, fast, row);
  } catch (const AccumulationSpecError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    bad(spec, e.what());
  }
}

std::string kernel_preset_spec(const KernelPreset& p) {
  return fmt::format("{}:{}:{}{}{}{}{}", p.name, p.input.name, p.output.name, p.rpr ? ":rpr=1" : "",
                     p.input_b ? ":input_b=" + p.input_b->name : "", p.fast_accum ? ":fast_accum=1" : "",
                     p.row_scales ? ":scales=row" : "");
}

std::vector<std::string> kernel_json_parts(const nlohmann::json& j) {
  auto str = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string())
      bad(j.dump(), fmt::format("field '{}' must be a string", key));
    return j[key].get<std::string>();
  };
  std::vector<std::string> parts{str("kind"), str("gpu"), str("input"), str("output")};
  if (j.contains("instruction")) parts.push_back(str("instruction"));
  for (const auto& [key, value] : j.items()) {
    if (key == "kind" || key == "gpu" || key == "input" || key == "output" || key == "instruction") continue;
    if (!(value.is_number_integer() || value.is_boolean() || value.is_string()))
      bad(j.dump(), fmt::format("field '{}' must be an integer, a boolean or a string", key));
    // The field tables read values as their spec text (ScheduleField, TcField).
    parts.push_back(fmt::format("{}={}", key, value.is_string() ? value.get<std::string>() : value.dump()));
  }
  return parts;
}

}  // namespace rpsim::sim::spec_detail
