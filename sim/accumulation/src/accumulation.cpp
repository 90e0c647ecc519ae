// Accumulation models: the summation algorithms over rounded products, the
// exact model and the Tensor Core model behind one value type.
#include "rpsim/accumulation/accumulation.hpp"

#include <fmt/format.h>

#include <Eigen/Core>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <vector>

#include "accumulation_arith.hpp"
#include "rpsim/accumulation/error_analysis.hpp"
#include "rpsim/accumulation/exact_accumulator.hpp"

namespace rpsim::sim {

namespace {

using acc_detail::Arith;

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// Strided view of the two operands.
struct Operands {
  const double* a;
  std::ptrdiff_t as;
  const double* b;
  std::ptrdiff_t bs;
  std::size_t k;
  double x(std::size_t i) const { return a[static_cast<std::ptrdiff_t>(i) * as]; }
  double y(std::size_t i) const { return b[static_cast<std::ptrdiff_t>(i) * bs]; }
};

// Stochastic draws: products use even indices, additions odd ones.
constexpr std::uint64_t product_index(std::size_t i) {
  return 2 * i;
}
constexpr std::uint64_t sum_index(std::size_t i) {
  return 2 * i + 1;
}

double sequential(const Sequential& m, const Operands& o, double c, std::uint64_t stream) {
  const Arith ar(m.acc, stream);
  double s = ar.round(c, sum_index(o.k));
  if (m.fused) {
    for (std::size_t i = 0; i < o.k; ++i) s = ar.fma(o.x(i), o.y(i), s, sum_index(i));
  } else {
    for (std::size_t i = 0; i < o.k; ++i)
      s = ar.add(s, ar.mul(o.x(i), o.y(i), product_index(i)), sum_index(i));
  }
  return s;
}

// Pairwise summation of p[lo, hi): the two halves summed recursively, then
// added (Higham, ASNA Sec. 4.1). Draws keyed by the node's first index and size.
double pairwise_sum(const Arith& ar, const std::vector<double>& p, std::size_t lo, std::size_t hi) {
  if (hi - lo == 1) return p[lo];
  const std::size_t mid = lo + (hi - lo) / 2;
  const double left = pairwise_sum(ar, p, lo, mid);
  const double right = pairwise_sum(ar, p, mid, hi);
  return ar.add(left, right, sum_index(lo) ^ (static_cast<std::uint64_t>(hi - lo) << 40));
}

std::vector<double> rounded_products(const Arith& ar, const Operands& o) {
  std::vector<double> p(o.k);
  for (std::size_t i = 0; i < o.k; ++i) p[i] = ar.mul(o.x(i), o.y(i), product_index(i));
  return p;
}

double pairwise(const Pairwise& m, const Operands& o, double c, std::uint64_t stream) {
  const Arith ar(m.acc, stream);
  const double cc = ar.round(c, sum_index(o.k) + 1);
  if (o.k == 0) return cc;
  const auto p = rounded_products(ar, o);
  return ar.add(pairwise_sum(ar, p, 0, p.size()), cc, sum_index(o.k));
}

// Blocked summation (Blanchard, Higham & Mary, SISC 2020, Alg. 3.1): recursive
// summation inside each block of b products, the block sums added recursively.
double blocked(const Blocked& m, const Operands& o, double c, std::uint64_t stream) {
  const Arith ar(m.acc, stream);
  const std::size_t b = static_cast<std::size_t>(m.block);
  double total = ar.round(c, sum_index(o.k));
  for (std::size_t start = 0; start < o.k; start += b) {
    const std::size_t end = std::min(o.k, start + b);
    double s = ar.mul(o.x(start), o.y(start), product_index(start));
    for (std::size_t i = start + 1; i < end; ++i)
      s = ar.add(s, ar.mul(o.x(i), o.y(i), product_index(i)), sum_index(i));
    total = ar.add(total, s, sum_index(start) ^ (1ull << 62));
  }
  return total;
}

// Kahan's compensated summation (Higham, ASNA Alg. 4.2) of the rounded products.
double kahan(const Kahan& m, const Operands& o, double c, std::uint64_t stream) {
  const Arith ar(m.acc, stream);
  double s = ar.round(c, sum_index(o.k));
  double comp = 0;
  for (std::size_t i = 0; i < o.k; ++i) {
    const double p = ar.mul(o.x(i), o.y(i), product_index(i));
    const std::uint64_t base = 4 * static_cast<std::uint64_t>(i) + (1ull << 61);
    const double y = ar.sub(p, comp, base);
    const double t = ar.add(s, y, base + 1);
    comp = ar.sub(ar.sub(t, s, base + 2), y, base + 3);
    s = t;
  }
  return s;
}

double exact(const Exact& m, const Operands& o, double c) {
  ExactAccumulator acc;
  for (std::size_t i = 0; i < o.k; ++i) acc.add_product(o.x(i), o.y(i));
  acc.add(c);
  Rounding r;
  r.mode = m.rounding;
  Flags f = 0;
  return to_double(m.output, acc.round(m.output, r, f));
}

// Eigen's vectorised inner product, then + c (see EigenGemm).
double eigen_dot(const Operands& o, double c) {
  if (o.k == 0) return c;
  using Strided = Eigen::Map<const Eigen::VectorXd, 0, Eigen::InnerStride<>>;
  const auto k = static_cast<Eigen::Index>(o.k);
  return Strided(o.a, k, Eigen::InnerStride<>(o.as)).dot(Strided(o.b, k, Eigen::InnerStride<>(o.bs))) + c;
}

double tensor_core(const TensorCoreModel& m, const Operands& o, double c) {
  std::vector<double> a(o.k), b(o.k);
  for (std::size_t i = 0; i < o.k; ++i) {
    a[i] = o.x(i);
    b[i] = o.y(i);
  }
  return tensor_core_dot(m, a, b, c);
}

// ---- spec strings ----

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
  throw std::invalid_argument(fmt::format("accumulation model '{}': {}", spec, why));
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

std::string fmt_name(const Format& f) {
  return f.name;
}

// The Tensor Core model's fields a user may override on top of a preset, in
// the spec string (`tc:h100:fp16:fp32:terms_per_step=8`) and in JSON alike;
// spec() writes back those that differ from the preset, so a customised
// model is recorded in results as what it is.
struct TcField {
  const char* name;
  std::string (*get)(const TensorCoreModel&);
  void (*set)(TensorCoreModel&, const std::string&);  // throws std::invalid_argument
};

int field_int(const char* name, const std::string& v) {
  try {
    std::size_t used = 0;
    const int x = std::stoi(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(fmt::format("{}='{}' is not an integer", name, v));
}

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

// The preset `m` started from (its name says which), for spec()'s diff.
TensorCoreModel preset_of(const TensorCoreModel& m) {
  const std::string gpu = m.name.substr(0, m.name.find(' '));
  const bool wgmma = m.name.find("wgmma") != std::string::npos;
  return tensor_core_preset(gpu, m.input, m.output, wgmma ? "wgmma" : "");
}

}  // namespace

AccumulationModel AccumulationModel::parse(std::string_view spec) {
  auto parts = split_colon(spec);
  std::uint64_t seed = 0;
  bool has_seed = false;
  if (parts.size() > 1 && parts.back().rfind("seed=", 0) == 0) {
    try {
      std::size_t used = 0;
      seed = std::stoull(parts.back().substr(5), &used);
      if (used != parts.back().size() - 5) throw std::invalid_argument("trailing text");
    } catch (const std::exception&) {
      bad(spec, fmt::format("'{}' is not seed=<unsigned integer>", parts.back()));
    }
    has_seed = true;
    parts.pop_back();
  }
  const std::string kind = parts[0];
  auto acc_from = [&](std::size_t first) {
    AccumulatorSpec acc;
    if (parts.size() > first) acc.format = parse_fmt(spec, parts[first]);
    if (parts.size() > first + 1) acc.rounding = parse_rnd(spec, parts[first + 1]);
    if (parts.size() > first + 2) bad(spec, fmt::format("unexpected '{}'", parts[first + 2]));
    acc.seed = seed;
    return acc;
  };
  if (kind == "sequential" || kind == "recursive") return AccumulationModel(Sequential{acc_from(1), false});
  if (kind == "fma") return AccumulationModel(Sequential{acc_from(1), true});
  if (kind == "pairwise") return AccumulationModel(Pairwise{acc_from(1)});
  if (kind == "kahan" || kind == "compensated") return AccumulationModel(Kahan{acc_from(1)});
  if (kind == "blocked") {
    if (parts.size() < 2) bad(spec, "blocked needs a block size, e.g. blocked:32");
    int b = 0;
    try {
      std::size_t used = 0;
      b = std::stoi(parts[1], &used);
      if (used != parts[1].size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      bad(spec, fmt::format("block size '{}' is not an integer", parts[1]));
    }
    if (b < 1) bad(spec, fmt::format("block size {} must be at least 1", b));
    return AccumulationModel(Blocked{b, acc_from(2)});
  }
  if (kind == "exact") {
    Exact e;
    if (parts.size() > 1) e.output = parse_fmt(spec, parts[1]);
    if (parts.size() > 2) e.rounding = parse_rnd(spec, parts[2]);
    if (parts.size() > 3) bad(spec, fmt::format("unexpected '{}'", parts[3]));
    if (e.rounding == RoundingMode::stochastic) bad(spec, "exact takes a deterministic final rounding");
    return AccumulationModel(e);
  }
  if (kind == "tc") {
    if (has_seed) bad(spec, "the tensor core model takes no seed");
    if (parts.size() < 2 || parts[1].empty()) bad(spec, "tc needs a preset, e.g. tc:h100");
    // Positional parts first, then key=value overrides of the preset.
    std::size_t positional = 0;
    while (positional < parts.size() && parts[positional].find('=') == std::string::npos) ++positional;
    const Format in = positional > 2 ? parse_fmt(spec, parts[2]) : formats::binary16();
    const Format out = positional > 3 ? parse_fmt(spec, parts[3]) : formats::binary32();
    const std::string instr = positional > 4 ? parts[4] : "";
    if (positional > 5) bad(spec, fmt::format("unexpected '{}'", parts[5]));
    try {
      TensorCoreModel m = tensor_core_preset(parts[1], in, out, instr);
      for (std::size_t i = positional; i < parts.size(); ++i) {
        const auto eq = parts[i].find('=');
        if (eq == std::string::npos)
          bad(spec, fmt::format("'{}' after an override is not key=value", parts[i]));
        const TcField* f = find_tc_field(std::string_view(parts[i]).substr(0, eq));
        if (!f)
          bad(spec,
              fmt::format("'{}' is not a tensor core field ({})", parts[i].substr(0, eq), tc_field_names()));
        f->set(m, parts[i].substr(eq + 1));
      }
      m.validate();
      return AccumulationModel(std::move(m));
    } catch (const std::invalid_argument& e) {
      bad(spec, e.what());
    }
  }
  if (kind == "eigen") {
    if (has_seed) bad(spec, "eigen takes no seed");
    if (parts.size() > 1 && parse_fmt(spec, parts[1]) != formats::binary64())
      bad(spec, fmt::format("eigen computes in binary64 only, not '{}'", parts[1]));
    if (parts.size() > 2 && parse_rnd(spec, parts[2]) != RoundingMode::nearest_even)
      bad(spec, "eigen rounds to nearest even only");
    if (parts.size() > 3) bad(spec, fmt::format("unexpected '{}'", parts[3]));
    return AccumulationModel(EigenGemm{});
  }
  bad(spec,
      fmt::format("unknown kind '{}' (sequential fma pairwise blocked:B kahan exact tc:PRESET eigen)", kind));
}

AccumulationModel AccumulationModel::from_json(const nlohmann::json& j) {
  if (j.is_string()) return parse(j.get<std::string>());
  if (!j.is_object()) throw std::invalid_argument("accumulation model JSON must be a string or an object");
  auto str = [&](const char* key, const std::string& def) {
    if (!j.contains(key)) return def;
    if (!j[key].is_string())
      throw std::invalid_argument(fmt::format("accumulation model field '{}' must be a string", key));
    return j[key].get<std::string>();
  };
  auto integer = [&](const char* key, long long def) {
    if (!j.contains(key)) return def;
    if (!j[key].is_number_integer())
      throw std::invalid_argument(fmt::format("accumulation model field '{}' must be an integer", key));
    return j[key].get<long long>();
  };
  const std::string kind = str("kind", "");
  if (kind.empty()) throw std::invalid_argument("accumulation model JSON needs \"kind\"");
  if (kind == "tc") {
    std::string spec =
        fmt::format("tc:{}:{}:{}", str("preset", ""), str("input", "fp16"), str("output", "fp32"));
    if (j.contains("instruction")) spec = fmt::format("{}:{}", spec, str("instruction", ""));
    for (const auto& [key, value] : j.items()) {
      if (key == "kind" || key == "preset" || key == "input" || key == "output" || key == "instruction")
        continue;
      if (!find_tc_field(key))
        throw std::invalid_argument(fmt::format("accumulation model field '{}' is not known for kind tc ({})",
                                                key, tc_field_names()));
      if (!(value.is_number_integer() || value.is_boolean() || value.is_string()))
        throw std::invalid_argument(
            fmt::format("accumulation model field '{}' must be an integer, a boolean or a string", key));
      spec += fmt::format(":{}={}", key, value.is_string() ? value.get<std::string>() : value.dump());
    }
    return parse(spec);
  }
  for (const auto& [key, value] : j.items())
    if (key != "kind" && key != "format" && key != "rounding" && key != "seed" && key != "block")
      throw std::invalid_argument(fmt::format(
          "accumulation model field '{}' is not known for kind {} (format rounding seed block)", key, kind));
  std::string spec = kind;
  if (kind == "blocked") spec += fmt::format(":{}", integer("block", 32));
  const std::string format = str("format", kind == "exact" || kind == "eigen" ? "binary64" : "binary32");
  spec += fmt::format(":{}:{}", format, str("rounding", "rne"));
  if (j.contains("seed")) spec += fmt::format(":seed={}", integer("seed", 0));
  return parse(spec);
}

std::string AccumulationModel::spec() const {
  auto acc_spec = [](const AccumulatorSpec& a) {
    std::string s = fmt::format("{}:{}", fmt_name(a.format), rounding_name(a.rounding));
    if (a.rounding == RoundingMode::stochastic) s += fmt::format(":seed={}", a.seed);
    return s;
  };
  return std::visit(
      Overloaded{[&](const Sequential& m) {
                   return fmt::format("{}:{}", m.fused ? "fma" : "sequential", acc_spec(m.acc));
                 },
                 [&](const Pairwise& m) { return "pairwise:" + acc_spec(m.acc); },
                 [&](const Blocked& m) { return fmt::format("blocked:{}:{}", m.block, acc_spec(m.acc)); },
                 [&](const Kahan& m) { return "kahan:" + acc_spec(m.acc); },
                 [&](const Exact& m) {
                   return fmt::format("exact:{}:{}", fmt_name(m.output), rounding_name(m.rounding));
                 },
                 [&](const TensorCoreModel& m) {
                   // name is "<gpu>[ <instr>] <in>-><out>"
                   const std::string gpu = m.name.substr(0, m.name.find(' '));
                   const bool wgmma = m.name.find("wgmma") != std::string::npos;
                   std::string s =
                       fmt::format("tc:{}:{}:{}{}", gpu, m.input.name, m.output.name, wgmma ? ":wgmma" : "");
                   // A model built by hand under another name: every field.
                   std::optional<TensorCoreModel> preset;
                   try {
                     preset = preset_of(m);
                   } catch (const std::invalid_argument&) {
                   }
                   for (const auto& f : tc_fields())
                     if (!preset || f.get(m) != f.get(*preset)) s += fmt::format(":{}={}", f.name, f.get(m));
                   return s;
                 },
                 [&](const EigenGemm&) { return std::string("eigen:binary64"); }},
      model_);
}

const Format& AccumulationModel::input_format() const {
  if (const auto* tc = std::get_if<TensorCoreModel>(&model_)) return tc->input;
  return output_format();
}

RoundingMode AccumulationModel::rounding() const {
  return std::visit(Overloaded{[](const TensorCoreModel& m) { return m.final_rounding; },
                               [](const Exact& m) { return m.rounding; },
                               [](const EigenGemm&) { return RoundingMode::nearest_even; },
                               [](const auto& m) { return m.acc.rounding; }},
                    model_);
}

double AccumulationModel::unit_roundoff() const {
  return sim::unit_roundoff(output_format(), rounding());
}

const Format& AccumulationModel::output_format() const {
  return std::visit(Overloaded{[](const Sequential& m) -> const Format& { return m.acc.format; },
                               [](const Pairwise& m) -> const Format& { return m.acc.format; },
                               [](const Blocked& m) -> const Format& { return m.acc.format; },
                               [](const Kahan& m) -> const Format& { return m.acc.format; },
                               [](const Exact& m) -> const Format& { return m.output; },
                               [](const TensorCoreModel& m) -> const Format& { return m.output; },
                               [](const EigenGemm&) -> const Format& { return formats::binary64(); }},
                    model_);
}

double AccumulationModel::dot_strided(const double* a, std::ptrdiff_t a_stride, const double* b,
                                      std::ptrdiff_t b_stride, std::size_t k, double c,
                                      std::uint64_t stream) const {
  const Operands o{a, a_stride, b, b_stride, k};
  return std::visit(Overloaded{[&](const Sequential& m) { return sequential(m, o, c, stream); },
                               [&](const Pairwise& m) { return pairwise(m, o, c, stream); },
                               [&](const Blocked& m) { return blocked(m, o, c, stream); },
                               [&](const Kahan& m) { return kahan(m, o, c, stream); },
                               [&](const Exact& m) { return exact(m, o, c); },
                               [&](const TensorCoreModel& m) { return tensor_core(m, o, c); },
                               [&](const EigenGemm&) { return eigen_dot(o, c); }},
                    model_);
}

double AccumulationModel::dot(std::span<const double> a, std::span<const double> b, double c,
                              std::uint64_t stream) const {
  if (a.size() != b.size())
    throw std::invalid_argument(fmt::format("dot: a has {} elements, b has {}", a.size(), b.size()));
  return dot_strided(a.data(), 1, b.data(), 1, a.size(), c, stream);
}

}  // namespace rpsim::sim
