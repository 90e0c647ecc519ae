// Golden tensor-core vectors: parsing (strict; errors name file and line) and
// bit-for-bit checking.
#include "rpsim/validation/tensor_core_golden.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "rpsim/accumulation/tensor_core_operands.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/io/json_keys.hpp"

namespace rpsim::sim {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw GoldenDataError(fmt::format("cannot open golden file '{}'", p.string()));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  while (!lines.empty() && lines.back().find_first_not_of(" \t") == std::string::npos) lines.pop_back();
  return lines;
}

// K space-separated 8-hex-digit binary32 patterns, each a value of `in`.
std::vector<double> parse_hex_line(const std::string& text, const fs::path& p, std::size_t line,
                                   const Format& in) {
  std::vector<double> values;
  std::istringstream ss(text);
  std::string tok;
  while (ss >> tok) {
    if (tok.size() != 8 ||
        !std::all_of(tok.begin(), tok.end(), [](unsigned char ch) { return std::isxdigit(ch); }))
      throw GoldenDataError(
          fmt::format("{}:{}: '{}' is not an 8-hex-digit binary32 pattern", p.string(), line, tok));
    const auto bits = static_cast<std::uint32_t>(std::stoul(tok, nullptr, 16));
    const double v = static_cast<double>(std::bit_cast<float>(bits));
    if (std::isfinite(v) && to_double(in, round_double(in, v, RoundingMode::nearest_even)) != v)
      throw GoldenDataError(
          fmt::format("{}:{}: {} is not exactly representable in {}", p.string(), line, tok, in.name));
    values.push_back(v);
  }
  return values;
}

std::uint32_t parse_binary_line(const std::string& text, const fs::path& p, std::size_t line) {
  std::string t = text;
  t.erase(std::remove_if(t.begin(), t.end(), [](unsigned char ch) { return std::isspace(ch); }), t.end());
  if (t.size() != 32 || t.find_first_not_of("01") != std::string::npos)
    throw GoldenDataError(
        fmt::format("{}:{}: '{}' is not a 32-character binary string", p.string(), line, text));
  return static_cast<std::uint32_t>(std::stoul(t, nullptr, 2));
}

Format input_format_of(const std::string& folder, const fs::path& dir) {
  if (const auto* c = tensor_core_operand_class_by_folder(folder)) return parse_format(c->format);
  std::vector<std::string_view> known;
  for (const auto& c : tensor_core_operand_classes())
    if (!c.golden_folder.empty()) known.push_back(c.golden_folder);
  throw GoldenDataError(
      fmt::format("'{}': input format folder '{}' is not {}", dir.string(), folder, fmt::join(known, ", ")));
}

}  // namespace

namespace {
// K per line in ../shared/tc-golden (its README's table; B200 as in the
// publishers' model_validation/B200); 0 when not listed.
std::size_t published_k(const std::string& gpu, const std::string& folder) {
  struct Row {
    const char* gpu;
    std::size_t fp16, bf16, tf32, fp8;
  };
  static const Row rows[] = {{"V100", 4, 0, 0, 0},
                             {"A100", 8, 8, 4, 0},
                             {"Ada", 8, 8, 4, 32},
                             {"H100", 16, 16, 4, 32},
                             {"B200", 16, 16, 4, 32}};
  for (const Row& r : rows) {
    if (gpu != r.gpu) continue;
    if (folder == "fp16") return r.fp16;
    if (folder == "bf16") return r.bf16;
    if (folder == "tf32") return r.tf32;
    if (folder == "E4M3" || folder == "E5M2") return r.fp8;
  }
  return 0;
}
}  // namespace

namespace {
struct Convention {
  std::string instruction;
  bool c_loaded = true;
  std::size_t k = 0;  // terms per line the writer says; 0: not said
};
struct Conventions {
  std::string gpu;  // "gpu": the name in the file names; "" when absent
  std::map<std::string, Convention> sets;
};

Convention read_set_convention(const fs::path& path, const std::string& key, const nlohmann::json& v) {
  auto text = [&](const char* field, std::initializer_list<const char*> allowed) {
    if (!v.is_object() || !v.contains(field) || !v[field].is_string())
      throw GoldenDataError(fmt::format("{}: set \"{}\" has no \"{}\" string", path.string(), key, field));
    const std::string s = v[field].get<std::string>();
    for (const char* a : allowed)
      if (s == a) return s;
    throw GoldenDataError(fmt::format("{}: set \"{}\": {} \"{}\" is not {}", path.string(), key, field, s,
                                      fmt::join(allowed, " or ")));
  };
  Convention c;
  c.instruction = text("instruction", {"mma.sync", "wgmma"});
  c.c_loaded = text("c", {"loaded", "zero"}) == "loaded";
  if (v.contains("k")) {
    if (!v["k"].is_number_unsigned() || v["k"].get<std::size_t>() == 0)
      throw GoldenDataError(
          fmt::format("{}: set \"{}\": \"k\" must be a positive integer", path.string(), key));
    c.k = v["k"].get<std::size_t>();
  }
  return c;
}

// conventions.json: {"gpu": "H100", "sets": {"E4M3/fp32": {"instruction":
// "wgmma", "c": "zero", "k": 32}, ...}}; "gpu" and "k" are optional.
Conventions read_conventions(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw GoldenDataError(fmt::format("cannot open '{}'", path.string()));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw GoldenDataError(fmt::format("{}: not JSON: {}", path.string(), e.what()));
  }
  if (const std::string key = io::duplicate_json_key(text); !key.empty())
    throw GoldenDataError(fmt::format("{}: {}", path.string(), io::duplicate_json_key_message(key)));
  if (!j.is_object() || !j.contains("sets") || !j["sets"].is_object())
    throw GoldenDataError(fmt::format("{}: no \"sets\" object", path.string()));
  Conventions out;
  if (j.contains("gpu")) {
    if (!j["gpu"].is_string() || j["gpu"].get<std::string>().empty())
      throw GoldenDataError(fmt::format("{}: \"gpu\" must be a non-empty string", path.string()));
    out.gpu = j["gpu"].get<std::string>();
  }
  for (const auto& [key, v] : j["sets"].items()) out.sets[key] = read_set_convention(path, key, v);
  return out;
}

// tc-golden's published conventions (its README) for a folder without conventions.json.
Convention published_convention(const std::string& gpu, const Format& in, const Format& out) {
  const std::string g = preset_for_gpu_folder(gpu);
  if ((g == "h100" || g == "h200") && in.man_bits <= 3 && out.man_bits == 23) return {"wgmma", false, 0};
  return {"", true, 0};
}

std::string folder_name(const fs::path& dir) {
  const fs::path p = fs::absolute(dir).lexically_normal();
  return p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
}

// One file's lines, checked to have as many as the a file.
std::vector<std::string> read_matching(const fs::path& p, const fs::path& a_path, std::size_t lines) {
  auto v = read_lines(p);
  if (v.size() != lines)
    throw GoldenDataError(fmt::format("{}: {} lines, but {} has {} (a, b, c and d must agree line by line)",
                                      a_path.string(), lines, p.string(), v.size()));
  return v;
}

struct SetFiles {
  fs::path a, b, c, d;
  std::vector<std::string> a_lines, b_lines, c_lines, d_lines;
};

void read_cases(GoldenSet& set, const SetFiles& f) {
  for (std::size_t i = 0; i < f.a_lines.size(); ++i) {
    GoldenCase gc;
    gc.line = i + 1;
    gc.a = parse_hex_line(f.a_lines[i], f.a, i + 1, set.input);
    gc.b = parse_hex_line(f.b_lines[i], f.b, i + 1, set.input);
    if (gc.a.empty()) throw GoldenDataError(fmt::format("{}:{}: no terms", f.a.string(), i + 1));
    if (i == 0) set.k = gc.a.size();
    if (gc.a.size() != set.k)
      throw GoldenDataError(
          fmt::format("{}:{}: {} terms, but line 1 has K = {}", f.a.string(), i + 1, gc.a.size(), set.k));
    if (gc.b.size() != set.k)
      throw GoldenDataError(fmt::format("{}:{}: {} terms, but K = {} (from {})", f.b.string(), i + 1,
                                        gc.b.size(), set.k, f.a.filename().string()));
    gc.c_bits = parse_binary_line(f.c_lines[i], f.c, i + 1);
    gc.d_bits = parse_binary_line(f.d_lines[i], f.d, i + 1);
    set.cases.push_back(std::move(gc));
  }
}

// The sets of one input-format folder (one per d file present).
void load_folder(const fs::path& gpu_dir, const std::string& gpu, const std::string& folder,
                 const std::optional<Conventions>& conventions, std::vector<GoldenSet>& sets) {
  const fs::path dir = gpu_dir / folder;
  SetFiles f;
  f.a = dir / fmt::format("a_{}_{}.txt", gpu, folder);
  f.b = dir / fmt::format("b_{}_{}.txt", gpu, folder);
  f.c = dir / fmt::format("c_{}_fp32.txt", gpu);
  f.a_lines = read_lines(f.a);
  f.b_lines = read_matching(f.b, f.a, f.a_lines.size());
  f.c_lines = read_matching(f.c, f.a, f.a_lines.size());
  bool any_d = false;
  for (const char* out_name : {"fp32", "fp16"}) {
    f.d = dir / fmt::format("d_{}_{}.txt", gpu, out_name);
    if (!fs::exists(f.d)) continue;
    any_d = true;
    f.d_lines = read_matching(f.d, f.a, f.a_lines.size());
    GoldenSet set;
    set.gpu = gpu;
    set.input_folder = folder;
    set.input = input_format_of(folder, dir);
    set.output = std::string(out_name) == "fp32" ? formats::binary32() : formats::binary16();
    set.d_path = f.d;
    Convention conv = published_convention(gpu, set.input, set.output);
    if (conventions) {
      const auto it = conventions->sets.find(fmt::format("{}/{}", folder, out_name));
      if (it == conventions->sets.end())
        throw GoldenDataError(fmt::format("{}: no entry for set \"{}/{}\" (its instruction and C)",
                                          (gpu_dir / "conventions.json").string(), folder, out_name));
      conv = it->second;
    }
    set.instruction = conv.instruction;
    set.c_loaded = conv.c_loaded;
    read_cases(set, f);
    // The published layout fixes K per GPU and format (tc-golden README); a
    // different K there means the files do not belong to that folder.
    if (const std::size_t want = conv.k ? conv.k : published_k(gpu, folder); want != 0 && set.k != want)
      throw GoldenDataError(fmt::format("{}: K = {} terms per line, but {} {} data has K = {}", f.a.string(),
                                        set.k, gpu, folder, want));
    sets.push_back(std::move(set));
  }
  if (!any_d)
    throw GoldenDataError(fmt::format("'{}': no d_{}_fp32.txt or d_{}_fp16.txt", dir.string(), gpu, gpu));
}
// conventions.json's "gpu" is the name the files carry (a_<gpu>_<folder>.txt):
// one that names no file of a folder (a typo) was reported as a missing file.
void check_gpu_name(const fs::path& gpu_dir, const std::string& gpu, const std::string& folder) {
  if (fs::exists(gpu_dir / folder / fmt::format("a_{}_{}.txt", gpu, folder))) return;
  std::vector<std::string> named;  // the <gpu> of the folder's a_<gpu>_<folder>.txt files
  const std::string tail = "_" + folder + ".txt";
  for (const auto& e : fs::directory_iterator(gpu_dir / folder)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 2 + tail.size() && n.starts_with("a_") && n.ends_with(tail))
      named.push_back(n.substr(2, n.size() - 2 - tail.size()));
  }
  std::sort(named.begin(), named.end());
  throw GoldenDataError(fmt::format(
      "{}: \"gpu\": \"{}\" names no file of {}/ (no a_{}_{}.txt); \"gpu\" is the GPU name in the file names, "
      "here {}",
      (gpu_dir / "conventions.json").string(), gpu, folder, gpu, folder,
      named.empty() ? std::string("none: the folder has no a_<GPU>_" + folder + ".txt")
                    : "one of: " + fmt::format("{}", fmt::join(named, " "))));
}

}  // namespace

std::vector<GoldenSet> load_golden_gpu(const fs::path& gpu_dir) {
  if (!fs::is_directory(gpu_dir))
    throw GoldenDataError(fmt::format("'{}' is not a folder of golden vectors", gpu_dir.string()));
  std::vector<std::string> folders;
  for (const auto& e : fs::directory_iterator(gpu_dir))
    if (e.is_directory()) folders.push_back(e.path().filename().string());
  std::sort(folders.begin(), folders.end());
  if (folders.empty())
    throw GoldenDataError(
        fmt::format("'{}' holds no input-format folders (fp16, bf16, ...)", gpu_dir.string()));
  const fs::path conventions_path = gpu_dir / "conventions.json";
  std::optional<Conventions> conventions;
  if (fs::exists(conventions_path)) conventions = read_conventions(conventions_path);
  // The GPU's name in the file names: conventions.json's "gpu", else the folder's.
  const std::string gpu = conventions && !conventions->gpu.empty() ? conventions->gpu : folder_name(gpu_dir);
  // Without conventions.json the folder's name must be a GPU's (tc-golden's
  // layout), or the first missing file would be all the user learns.
  if (!conventions && preset_for_gpu_folder(gpu).empty()) {
    std::vector<std::string> known;
    for (const auto& preset : tensor_core_preset_names())
      if (const auto f = gpu_folder_for_preset(preset);
          !f.empty() && std::find(known.begin(), known.end(), f) == known.end())
        known.push_back(f);
    throw GoldenDataError(
        fmt::format("'{}' is not a GPU folder: it has no conventions.json and '{}' names no GPU (tc-golden's "
                    "folders: {}); "
                    "an MMA-Sim vector file or folder is read too",
                    gpu_dir.string(), gpu, fmt::join(known, " ")));
  }
  std::vector<GoldenSet> sets;
  for (const auto& folder : folders) {
    if (conventions && !conventions->gpu.empty()) check_gpu_name(gpu_dir, gpu, folder);
    load_folder(gpu_dir, gpu, folder, conventions, sets);
  }
  return sets;
}

bool golden_uses_wgmma(const GoldenSet& set) {
  // conventions.json's instruction, "" (not given) being mma.sync as the table reads it.
  return parse_tensor_core_instruction(set.instruction) == tc_wgmma;
}

double golden_c(const GoldenSet& set, const GoldenCase& gc) {
  if (!set.c_loaded) return 0.0;  // e.g. tc-golden's H100 FP8 wgmma: the accumulator starts at zero
  const double c = static_cast<double>(std::bit_cast<float>(gc.c_bits));
  if (set.output.man_bits == 10)
    return to_double(set.output, round_double(set.output, c, RoundingMode::nearest_even));
  return c;
}

TensorCoreModel golden_model(const GoldenSet& set, const std::string& preset) {
  std::string name = preset.empty() ? preset_for_gpu_folder(set.gpu) : preset;
  if (name.empty())
    throw GoldenDataError(
        fmt::format("no tensor core preset for GPU folder '{}'; give one with --model (known: {})", set.gpu,
                    fmt::join(tensor_core_preset_names(), " ")));
  return tensor_core_preset(name, set.input, set.output, set.instruction);
}

GoldenCheck check_golden(const GoldenSet& set, const TensorCoreModel& model, std::size_t show) {
  GoldenCheck r;
  for (const auto& gc : set.cases) {
    const double c = golden_c(set, gc);
    const double d = tensor_core_dot(model, gc.a, gc.b, c);
    const auto got =
        std::isnan(d) ? 0x7fffffffu : static_cast<std::uint32_t>(round_double(formats::binary32(), d));
    ++r.total;
    if (got == gc.d_bits) {
      ++r.passed;
    } else if (r.first_mismatches.size() < show) {
      std::string a, b;
      for (std::size_t i = 0; i < gc.a.size(); ++i) {
        a += fmt::format("{}{:08x}", i ? " " : "", std::bit_cast<std::uint32_t>(static_cast<float>(gc.a[i])));
        b += fmt::format("{}{:08x}", i ? " " : "", std::bit_cast<std::uint32_t>(static_cast<float>(gc.b[i])));
      }
      r.first_mismatches.push_back(
          fmt::format("line {}: a=[{}] b=[{}] c={:08x} expected {:08x} ({}) got {:08x} ({})", gc.line, a, b,
                      std::bit_cast<std::uint32_t>(static_cast<float>(c)), gc.d_bits,
                      std::bit_cast<float>(gc.d_bits), got, std::bit_cast<float>(got)));
    }
  }
  return r;
}

}  // namespace rpsim::sim
