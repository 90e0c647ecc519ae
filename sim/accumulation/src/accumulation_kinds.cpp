// The table of accumulation kinds (accumulation_kinds.hpp): one row per kind
// with its parser, JSON builder, spec writer, help and run-plan cost. The
// summation kinds' parsers are here; tc:, kernel: and the kernel presets'
// are in accumulation_spec.cpp and kernel_schedule_spec.cpp.
#include "rpsim/accumulation/accumulation_kinds.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "accumulation_spec.hpp"

namespace rpsim::sim {

namespace {

using namespace spec_detail;
using Parts = std::vector<std::string>;

// A model of an alternative (the one user conversion a return cannot chain).
template <class T>
AccumulationModel model_of(T x) {
  return AccumulationModel(AccumulationModel::Variant(std::move(x)));
}

// An accumulator from parts[first..]: [FMT[:RND]].
AccumulatorSpec acc_from(std::string_view spec, const Parts& parts, std::size_t first, std::uint64_t seed) {
  AccumulatorSpec acc;
  if (parts.size() > first) acc.format = parse_fmt(spec, parts[first]);
  if (parts.size() > first + 1) acc.rounding = parse_rnd(spec, parts[first + 1]);
  if (parts.size() > first + 2) bad(spec, fmt::format("unexpected '{}'", parts[first + 2]));
  acc.seed = seed;
  return acc;
}

std::string acc_spec(const AccumulatorSpec& a) {
  std::string s = fmt::format("{}:{}", a.format.name, rounding_name(a.rounding));
  if (a.rounding == RoundingMode::stochastic) s += fmt::format(":seed={}", a.seed);
  return s;
}

// The JSON of a summation kind: {"kind", "format", "rounding", "seed",
// "block"}; `block` is accepted by every summation kind (as before the
// table) and read by blocked only.
struct SummationJson {
  AccumulatorSpec acc;
  long long block = 32;
};
SummationJson summation_json(const nlohmann::json& j, const char* default_format) {
  const std::string label = j.dump();
  auto str = [&](const char* key, const char* def) {
    if (!j.contains(key)) return std::string(def);
    if (!j[key].is_string()) bad(label, fmt::format("field '{}' must be a string", key));
    return j[key].get<std::string>();
  };
  auto integer = [&](const char* key, long long def) {
    if (!j.contains(key)) return def;
    if (!j[key].is_number_integer()) bad(label, fmt::format("field '{}' must be an integer", key));
    return j[key].get<long long>();
  };
  for (const auto& [key, value] : j.items())
    if (key != "kind" && key != "format" && key != "rounding" && key != "seed" && key != "block")
      bad(label, fmt::format("field '{}' is not known for kind {} (format rounding seed block)", key,
                             j["kind"].get<std::string>()));
  SummationJson out;
  out.acc.format = parse_fmt(label, str("format", default_format));
  out.acc.rounding = parse_rnd(label, str("rounding", "rne"));
  out.acc.seed = static_cast<std::uint64_t>(integer("seed", 0));
  out.block = integer("block", 32);
  return out;
}

int block_size(std::string_view spec, const std::string& token) {
  int b = 0;
  try {
    b = field_int("block", token);
  } catch (const std::invalid_argument&) {
    bad(spec, fmt::format("block size '{}' is not an integer", token));
  }
  if (b < 1) bad(spec, fmt::format("block size {} must be at least 1", b));
  return b;
}

Exact exact_of(std::string_view spec, const Format& output, RoundingMode rounding) {
  if (rounding == RoundingMode::stochastic) bad(spec, "exact takes a deterministic final rounding");
  return Exact{output, rounding};
}

// `format` as written (the error quotes it).
AccumulationModel eigen_of(std::string_view spec, const std::string& format, RoundingMode rounding) {
  if (parse_fmt(spec, format) != formats::binary64())
    bad(spec, fmt::format("eigen computes in binary64 only, not '{}'", format));
  if (rounding != RoundingMode::nearest_even) bad(spec, "eigen rounds to nearest even only");
  return model_of(EigenGemm{});
}

// The run plan's costs (run_plan.cpp's measured figures): a sequential
// round-to-nearest model in binary32 or binary64 runs on the native kernel,
// narrower formats cost 23 ns per multiply-add, per-element emulation
// (pairwise, blocked, Kahan, exact, stochastic, kernel schedules) 250 ns, the
// bare Tensor Core chain 2.6 ns.
double sequential_cost(const AccumulationModel& m) {
  if (m.rounding() != RoundingMode::nearest_even) return 250e-9;
  const Format& f = m.output_format();
  return f == formats::binary32() || f == formats::binary64() ? 0 : 23e-9;
}
double emulated_cost(const AccumulationModel&) {
  return 250e-9;
}

template <class T>
const T* as(const AccumulationModel& m) {
  return std::get_if<T>(&m.variant());
}

// The JSON of tc, kernel and preset kinds, as spec parts: {"kind":"tc",
// "preset":...} takes IN fp16 and OUT fp32 by default, like its spec.
Parts gpu_json_parts(const nlohmann::json& j) {
  nlohmann::json k = j;
  if (k["kind"] == "tc") {
    if (k.contains("preset") && !k["preset"].is_string()) bad(j.dump(), "field 'preset' must be a string");
    k["gpu"] = k.contains("preset") ? k["preset"] : nlohmann::json("");
    if (!k.contains("input")) k["input"] = "fp16";
    if (!k.contains("output")) k["output"] = "fp32";
    k.erase("preset");
  }
  return kernel_json_parts(k);
}

const AccumulationKind kKinds[] = {
    {.name = "sequential",
     .aliases = "recursive",
     .usage = "sequential[:FMT[:RND]]",
     .help = "recursive summation, products rounded to FMT, each addition rounded (default binary32, rne)",
     .takes_seed = true,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t seed) -> AccumulationModel {
       return model_of(Sequential{acc_from(spec, p, 1, seed), false});
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       return model_of(Sequential{summation_json(j, "binary32").acc, false});
     },
     .is = [](const AccumulationModel& m) { return as<Sequential>(m) && !as<Sequential>(m)->fused; },
     .spec = [](const AccumulationModel& m) { return "sequential:" + acc_spec(as<Sequential>(m)->acc); },
     .seconds_per_multiply_add = sequential_cost},
    {.name = "fma",
     .aliases = "",
     .usage = "fma[:FMT[:RND]]",
     .help = "recursive summation with fused multiply-add, one rounding per step",
     .takes_seed = true,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t seed) -> AccumulationModel {
       return model_of(Sequential{acc_from(spec, p, 1, seed), true});
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       return model_of(Sequential{summation_json(j, "binary32").acc, true});
     },
     .is = [](const AccumulationModel& m) { return as<Sequential>(m) && as<Sequential>(m)->fused; },
     .spec = [](const AccumulationModel& m) { return "fma:" + acc_spec(as<Sequential>(m)->acc); },
     .seconds_per_multiply_add = sequential_cost},
    {.name = "pairwise",
     .aliases = "",
     .usage = "pairwise[:FMT[:RND]]",
     .help = "pairwise (tree) summation of the rounded products",
     .takes_seed = true,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t seed) -> AccumulationModel {
       return model_of(Pairwise{acc_from(spec, p, 1, seed)});
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       return model_of(Pairwise{summation_json(j, "binary32").acc});
     },
     .is = [](const AccumulationModel& m) { return as<Pairwise>(m) != nullptr; },
     .spec = [](const AccumulationModel& m) { return "pairwise:" + acc_spec(as<Pairwise>(m)->acc); },
     .seconds_per_multiply_add = emulated_cost},
    {.name = "blocked",
     .aliases = "",
     .usage = "blocked:B[:FMT[:RND]]",
     .help = "blocked summation, block size B (Blanchard, Higham & Mary, SISC 2020)",
     .takes_seed = true,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t seed) -> AccumulationModel {
       if (p.size() < 2) bad(spec, "blocked needs a block size, e.g. blocked:32");
       return model_of(Blocked{block_size(spec, p[1]), acc_from(spec, p, 2, seed)});
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       const auto s = summation_json(j, "binary32");
       return model_of(Blocked{block_size(j.dump(), std::to_string(s.block)), s.acc});
     },
     .is = [](const AccumulationModel& m) { return as<Blocked>(m) != nullptr; },
     .spec =
         [](const AccumulationModel& m) {
           return fmt::format("blocked:{}:{}", as<Blocked>(m)->block, acc_spec(as<Blocked>(m)->acc));
         },
     .seconds_per_multiply_add = emulated_cost},
    {.name = "kahan",
     .aliases = "compensated",
     .usage = "kahan[:FMT[:RND]]",
     .help = "compensated (Kahan) summation of the rounded products",
     .takes_seed = true,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t seed) -> AccumulationModel {
       return model_of(Kahan{acc_from(spec, p, 1, seed)});
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       return model_of(Kahan{summation_json(j, "binary32").acc});
     },
     .is = [](const AccumulationModel& m) { return as<Kahan>(m) != nullptr; },
     .spec = [](const AccumulationModel& m) { return "kahan:" + acc_spec(as<Kahan>(m)->acc); },
     .seconds_per_multiply_add = emulated_cost},
    {.name = "exact",
     .aliases = "",
     .usage = "exact[:FMT[:RND]]",
     .help = "no rounding until one final rounding to FMT (default binary64); the ground truth",
     // A seed is accepted and ignored (as before the table): exact has no
     // stochastic rounding.
     .takes_seed = true,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t) -> AccumulationModel {
       if (p.size() > 3) bad(spec, fmt::format("unexpected '{}'", p[3]));
       return model_of(exact_of(spec, p.size() > 1 ? parse_fmt(spec, p[1]) : formats::binary64(),
                                p.size() > 2 ? parse_rnd(spec, p[2]) : RoundingMode::nearest_even));
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       const auto s = summation_json(j, "binary64");
       return model_of(exact_of(j.dump(), s.acc.format, s.acc.rounding));
     },
     .is = [](const AccumulationModel& m) { return as<Exact>(m) != nullptr; },
     .spec =
         [](const AccumulationModel& m) {
           return fmt::format("exact:{}:{}", as<Exact>(m)->output.name,
                              rounding_name(as<Exact>(m)->rounding));
         },
     .seconds_per_multiply_add = emulated_cost},
    {.name = "tc",
     .aliases = "",
     .usage = "tc:PRESET[:IN[:OUT[:INSTR]]][:FIELD=VALUE...]",
     .help = "a Tensor Core instruction preset (tensor_core.hpp), IN fp16 and OUT fp32 by default",
     .takes_seed = false,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t) -> AccumulationModel {
       return parse_tc(spec, p);
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       return parse_tc(j.dump(), gpu_json_parts(j));
     },
     .is = [](const AccumulationModel& m) { return m.bare_instruction() != nullptr; },
     .spec = [](const AccumulationModel& m) { return tc_spec(*m.bare_instruction()); },
     .seconds_per_multiply_add = [](const AccumulationModel&) { return 2.6e-9; }},
    {.name = "kernel",
     .aliases = "",
     .usage = "kernel:GPU:IN:OUT[:INSTR][:FIELD=VALUE...]",
     .help = "a GEMM kernel's schedule over a Tensor Core instruction (kernel_schedule.hpp)",
     .takes_seed = false,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t) -> AccumulationModel {
       return model_of(parse_kernel(spec, p));
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       return model_of(parse_kernel(j.dump(), gpu_json_parts(j)));
     },
     .is = [](const AccumulationModel& m) { return as<KernelSchedule>(m) && !m.bare_instruction(); },
     .spec = [](const AccumulationModel& m) { return kernel_spec(*as<KernelSchedule>(m)); },
     .seconds_per_multiply_add = emulated_cost},
    {.name = "cublas",
     .aliases = "",
     .usage = "LIB:GPU:IN:OUT[:rpr=0|1][:input_b=FMT][:fast_accum=0|1][:scales=tensor|row]",
     .help = "a named kernel preset (kernel_presets()): the schedule the library picks for the shape",
     .takes_seed = false,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t) -> AccumulationModel {
       return model_of(parse_kernel_preset(spec, p));
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       return model_of(parse_kernel_preset(j.dump(), gpu_json_parts(j)));
     },
     .is = [](const AccumulationModel& m) { return as<KernelPreset>(m) != nullptr; },
     .spec = [](const AccumulationModel& m) { return kernel_preset_spec(*as<KernelPreset>(m)); },
     .seconds_per_multiply_add = emulated_cost,
     .also_names = is_kernel_preset_library},
    {.name = "eigen",
     .aliases = "",
     .usage = "eigen[:binary64[:rne]]",
     .help = "Eigen's own binary64 product in the order Eigen picks (not a summation model)",
     .takes_seed = false,
     .parse = [](std::string_view spec, const Parts& p, std::uint64_t) -> AccumulationModel {
       if (p.size() > 3) bad(spec, fmt::format("unexpected '{}'", p[3]));
       return eigen_of(spec, p.size() > 1 ? p[1] : "binary64",
                       p.size() > 2 ? parse_rnd(spec, p[2]) : RoundingMode::nearest_even);
     },
     .from_json = [](const nlohmann::json& j) -> AccumulationModel {
       const auto s = summation_json(j, "binary64");
       return eigen_of(j.dump(), s.acc.format.name, s.acc.rounding);
     },
     .is = [](const AccumulationModel& m) { return as<EigenGemm>(m) != nullptr; },
     .spec = [](const AccumulationModel&) { return std::string("eigen:binary64"); },
     .seconds_per_multiply_add = [](const AccumulationModel&) { return 0.0; }},
};

}  // namespace

std::span<const AccumulationKind> accumulation_kinds() {
  return kKinds;
}

const AccumulationKind* find_accumulation_kind(std::string_view kind) {
  for (const auto& k : kKinds) {
    if (kind == k.name || (k.also_names && k.also_names(kind))) return &k;
    for (std::string_view rest = k.aliases; !rest.empty();) {
      const auto space = rest.find(' ');
      if (rest.substr(0, space) == kind) return &k;
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
  }
  return nullptr;
}

const AccumulationKind& accumulation_kind_of(const AccumulationModel& m) {
  for (const auto& k : kKinds)
    if (k.is(m)) return k;
  throw std::logic_error("accumulation model of no kind");  // a variant alternative without a row
}

std::string accumulation_kind_names() {
  std::string names;
  for (const auto& k : kKinds) {
    const std::string_view usage(k.usage);
    if (!names.empty()) names += ' ';
    names += usage.substr(0, usage.find('['));
  }
  return names;
}

std::string accumulation_kind_help() {
  std::string help;
  for (const auto& k : kKinds) help += fmt::format("  {}\n      {}\n", k.usage, k.help);
  return help;
}

}  // namespace rpsim::sim
