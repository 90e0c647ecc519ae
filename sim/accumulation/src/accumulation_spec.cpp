// Spec strings of accumulation models: token helpers and the Tensor Core
// model's fields (accumulation_spec.hpp).
#include "accumulation_spec.hpp"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>

namespace rpsim::sim::spec_detail {

std::vector<std::string> split_colon(std::string_view s) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = s.find(':', start);
    parts.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

[[noreturn]] void bad(std::string_view spec, const std::string& why) {
  throw AccumulationSpecError(fmt::format("accumulation model '{}': {}", spec, why));
}

Format parse_fmt(std::string_view spec, const std::string& token) {
  try {
    return parse_format(token);
  } catch (const std::exception& e) {
    bad(spec, fmt::format("format '{}': {}", token, e.what()));
  }
}

RoundingMode parse_rnd(std::string_view spec, const std::string& token) {
  try {
    return parse_rounding(token);
  } catch (const std::exception&) {
    bad(spec, fmt::format("rounding '{}' is not one of {}", token, rounding_names()));
  }
}

int field_int(const char* name, const std::string& v) {
  try {
    std::size_t used = 0;
    const int x = std::stoi(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(fmt::format("{}='{}' is not an integer", name, v));
}

namespace {

bool field_bool(const char* name, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  throw std::invalid_argument(fmt::format("{}='{}' is not true or false", name, v));
}

#define RPSIM_TC_INT_FIELD(f)                                                                               \
  TcField {                                                                                                 \
#f, [](const TensorCoreModel& m) { return std::to_string(m.f); }, [](TensorCoreModel & m,               \
                                                                         const std::string&                 \
                                                                             v) { m.f = field_int(#f, v); } \
  }
#define RPSIM_TC_BOOL_FIELD(f)                                                                            \
  TcField {                                                                                               \
#f, [](const TensorCoreModel&                                                                         \
               m) { return std::string(m.f ? "true" : "false"); }, [](TensorCoreModel & m,                \
                                                                      const std::string&                  \
                                                                          v) { m.f = field_bool(#f, v); } \
  }

}  // namespace

const std::vector<TcField>& tc_fields() {
  static const std::vector<TcField> fields{
      RPSIM_TC_INT_FIELD(terms_per_step),
      RPSIM_TC_INT_FIELD(fraction_bits),
      RPSIM_TC_INT_FIELD(result_fraction_bits),
      TcField{"final_rounding",
              [](const TensorCoreModel& m) { return std::string(rounding_name(m.final_rounding)); },
              [](TensorCoreModel& m, const std::string& v) {
                try {
                  m.final_rounding = parse_rounding(v);
                } catch (const std::exception&) {
                  throw std::invalid_argument(
                      fmt::format("final_rounding='{}' is not one of {}", v, rounding_names(" ", true)));
                }
              }},
      RPSIM_TC_BOOL_FIELD(subnormal_inputs),
      RPSIM_TC_BOOL_FIELD(subnormal_outputs),
      RPSIM_TC_INT_FIELD(alignment_exponent_floor),
      TcField{"c_join",
              [](const TensorCoreModel& m) {
                return std::string(m.c_join == CJoin::after_products ? "after_products" : "with_products");
              },
              [](TensorCoreModel& m, const std::string& v) {
                if (v == "with_products") {
                  m.c_join = CJoin::aligned_with_products;
                } else if (v == "after_products") {
                  m.c_join = CJoin::after_products;
                } else {
                  throw std::invalid_argument(
                      fmt::format("c_join='{}' is not with_products or after_products", v));
                }
              }},
      RPSIM_TC_INT_FIELD(terms_per_instruction),
      RPSIM_TC_INT_FIELD(step_interleave),
  };
  return fields;
}
#undef RPSIM_TC_INT_FIELD
#undef RPSIM_TC_BOOL_FIELD

const TcField* find_tc_field(std::string_view name) {
  for (const auto& f : tc_fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::string tc_field_names() {
  std::string names;
  for (const auto& f : tc_fields()) {
    if (!names.empty()) names += ' ';
    names += f.name;
  }
  return names;
}

namespace {

// The preset `m` started from, for spec()'s diff.
TensorCoreModel preset_of(const TensorCoreModel& m) {
  return tensor_core_preset(m.preset, m.input, m.output, m.instruction, m.b_input(),
                            m.scale ? &*m.scale : nullptr, m.scale_block);
}

// Keys that pick the preset's row rather than override a field of it:
// mixed operands and block scales (tcgen05.mma.block_scale, mma.block_scale).
// Written back by tc_spec when set.
struct TcSelector {
  const char* name;
  std::string (*get)(const TensorCoreModel&);  // "" when unset
};
constexpr TcSelector kTcSelectors[] = {
    {"input_b", [](const TensorCoreModel& m) { return m.input_b ? m.input_b->name : std::string(); }},
    {"scale", [](const TensorCoreModel& m) { return m.scale ? scale_format_name(*m.scale) : std::string(); }},
    {"scale_block",
     [](const TensorCoreModel& m) {
       return m.scale_block > 0 ? std::to_string(m.scale_block) : std::string();
     }},
};

bool is_selector(std::string_view key) {
  for (const auto& s : kTcSelectors)
    if (key == s.name) return true;
  return false;
}

// The preset a tc spec names: its positional parts and selector keys.
TensorCoreModel selected_preset(std::string_view spec, const std::vector<std::string>& parts,
                                std::size_t positional) {
  const Format in = positional > 2 ? parse_fmt(spec, parts[2]) : formats::binary16();
  const Format out = positional > 3 ? parse_fmt(spec, parts[3]) : formats::binary32();
  const std::string instr = positional > 4 ? parts[4] : "";
  if (positional > 5) bad(spec, fmt::format("unexpected '{}'", parts[5]));
  Format in_b = in;
  std::optional<Format> scale;
  int block = 0;
  for (std::size_t i = positional; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    const std::string key = parts[i].substr(0, eq), v = parts[i].substr(eq + 1);
    if (key == "input_b") in_b = parse_fmt(spec, v);
    if (key == "scale") scale = parse_scale_format(v);
    if (key == "scale_block") block = field_int("scale_block", v);
  }
  if (block != 0 && !scale) throw std::invalid_argument("scale_block given without scale=ue8m0|ue4m3");
  if (scale && block == 0) block = default_scale_block(*scale);
  return tensor_core_preset(parts[1], in, out, instr, in_b, scale ? &*scale : nullptr, block);
}

}  // namespace

std::string scale_format_name(const Format& f) {
  return f.exp_bits == 8 && f.man_bits == 0 ? "ue8m0" : "ue4m3";
}

Format parse_scale_format(const std::string& v) {
  if (v == "ue8m0") return parse_format("e8m0");
  // ue4m3: E4M3 read without its sign (MMA-Sim; PTX's ue4m3).
  if (v == "ue4m3") return formats::e4m3();
  throw std::invalid_argument(fmt::format("scale='{}' is not a block-scale format (ue8m0 ue4m3)", v));
}

int default_scale_block(const Format& scale) {
  // MX (OCP MX v1.0): E8M0 per 32; NVFP4: E4M3 per 16.
  return scale.exp_bits == 8 ? 32 : 16;
}

std::size_t positional_parts(const std::vector<std::string>& parts) {
  std::size_t n = 0;
  while (n < parts.size() && parts[n].find('=') == std::string::npos) ++n;
  for (std::size_t i = n; i < parts.size(); ++i)
    if (parts[i].find('=') == std::string::npos)
      throw std::invalid_argument(fmt::format("'{}' after an override is not key=value", parts[i]));
  return n;
}

TensorCoreModel parse_tc(std::string_view spec, const std::vector<std::string>& parts) {
  if (parts.size() < 2 || parts[1].empty()) bad(spec, "tc needs a preset, e.g. tc:h100");
  try {
    // Positional parts first, then key=value overrides of the preset.
    const std::size_t positional = positional_parts(parts);
    TensorCoreModel m = selected_preset(spec, parts, positional);
    for (std::size_t i = positional; i < parts.size(); ++i) {
      const auto eq = parts[i].find('=');
      if (is_selector(std::string_view(parts[i]).substr(0, eq))) continue;
      const TcField* f = find_tc_field(std::string_view(parts[i]).substr(0, eq));
      if (!f)
        throw std::invalid_argument(
            fmt::format("'{}' is not a tensor core field ({} input_b scale scale_block)",
                        parts[i].substr(0, eq), tc_field_names()));
      f->set(m, parts[i].substr(eq + 1));
    }
    m.validate();
    return m;
  } catch (const AccumulationSpecError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    bad(spec, e.what());
  }
}

std::string tc_spec(const TensorCoreModel& m) {
  std::string s = fmt::format("tc:{}:{}:{}", m.preset, m.input.name, m.output.name);
  if (m.instruction != tc_mma_sync) s += fmt::format(":{}", tensor_core_instruction_name(m.instruction));
  for (const auto& sel : kTcSelectors)
    if (const std::string v = sel.get(m); !v.empty()) s += fmt::format(":{}={}", sel.name, v);
  // A model built by hand under another name: every field.
  std::optional<TensorCoreModel> preset;
  try {
    preset = preset_of(m);
  } catch (const std::invalid_argument&) {
  }
  for (const auto& f : tc_fields())
    if (!preset || f.get(m) != f.get(*preset)) s += fmt::format(":{}={}", f.name, f.get(m));
  return s;
}

}  // namespace rpsim::sim::spec_detail
