// MMA-Sim vector files: strict parsing (errors name file, line and field),
// the header -> preset mapping, and bit-for-bit checking.
#include "rpsim/validation/mma_sim_vectors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "rpsim/accumulation/tensor_core_operands.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

namespace fs = std::filesystem;

namespace {

// A format name of the layout (its README, "Layout of a file"): operands from
// the operand-class table, the two block-scale formats here.
MmaSimFormat format_named(const std::string& name, const fs::path& p, const std::string& field) {
  if (const auto* c = tensor_core_operand_class_by_mma_sim(name)) {
    MmaSimFormat f{name, parse_format(c->format), (c->bits + 3) / 4, ~std::uint64_t{0}};
    // tf32 / xf32 arrive in a binary32 container; the instruction ignores
    // (MMA-Sim truncates) the low 13 bits.
    if (c->input_bit == tc_tf32) {
      f.digits = 8;
      f.keep_mask = ~std::uint64_t{0x1fff};
    }
    return f;
  }
  if (name == "ue8m0") return {name, parse_format("e8m0"), 2, ~std::uint64_t{0}};
  // ue4m3: an E4M3 pattern whose sign MMA-Sim ignores.
  if (name == "ue4m3") return {name, formats::e4m3(), 2, 0x7f};
  throw GoldenDataError(fmt::format("{}: {} '{}' is not a format of the MMA-Sim layout ({} ue8m0 ue4m3)",
                                    p.string(), field, name, tensor_core_operand_names()));
}

std::uint64_t parse_hex(const std::string& tok, int digits, const fs::path& p, std::size_t line,
                        const std::string& what) {
  if (static_cast<int>(tok.size()) != digits ||
      !std::all_of(tok.begin(), tok.end(), [](unsigned char ch) { return std::isxdigit(ch); }))
    throw GoldenDataError(
        fmt::format("{}:{}: {} '{}' is not {} hex digits", p.string(), line, what, tok, digits));
  return std::stoull(tok, nullptr, 16);
}

double decode(const MmaSimFormat& f, std::uint64_t bits) {
  // tf32 / xf32: a binary32 pattern whose cut low bits leave a tf32 value.
  if (f.format == formats::tf32())
    return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits & f.keep_mask)));
  return to_double(f.format, bits & f.keep_mask);
}

using Header = std::map<std::string, std::string>;

std::string first_word(const std::string& s) {
  return s.substr(0, s.find(' '));
}

const std::string& need(const Header& h, const std::string& key, const fs::path& p) {
  const auto it = h.find(key);
  if (it == h.end() || it->second.empty())
    throw GoldenDataError(fmt::format("{}: header has no '# {}:' line", p.string(), key));
  return it->second;
}

std::size_t header_count(const Header& h, const std::string& key, const fs::path& p) {
  const std::string v = first_word(need(h, key, p));
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || std::stoull(v) == 0)
    throw GoldenDataError(fmt::format("{}: header {} '{}' is not a positive integer", p.string(), key, v));
  return std::stoull(v);
}

void read_header(MmaSimFile& f, const Header& h) {
  const fs::path& p = f.path;
  f.arch = need(h, "arch", p);
  f.family = need(h, "family", p);
  f.qualifier = need(h, "qualifier", p);
  f.k = header_count(h, "K", p);
  f.a = format_named(first_word(need(h, "a_format", p)), p, "a_format");
  f.b = format_named(first_word(need(h, "b_format", p)), p, "b_format");
  f.c = format_named(first_word(need(h, "c_format", p)), p, "c_format");
  f.d = format_named(first_word(need(h, "d_format", p)), p, "d_format");
  const std::string scale = first_word(need(h, "scale_format", p));
  if (scale != "none") {
    f.scale = format_named(scale, p, "scale_format");
    f.block_size = header_count(h, "block_size", p);
    if (f.k % f.block_size != 0)
      throw GoldenDataError(
          fmt::format("{}: block_size {} does not divide K = {}", p.string(), f.block_size, f.k));
  }
  const std::string& nan = need(h, "nan", p);
  f.nan_any = nan.find("'is NaN'") != std::string::npos;
  if (!f.nan_any && nan.find("bitwise") == std::string::npos)
    throw GoldenDataError(
        fmt::format("{}: header nan '{}' says neither 'is NaN' nor bitwise", p.string(), nan));
}

void read_case(MmaSimFile& f, const std::string& text, std::size_t line) {
  std::istringstream ss(text);
  std::vector<std::string> tok;
  for (std::string t; ss >> t;) tok.push_back(t);
  const std::size_t blocks = f.scale ? f.k / f.block_size : 0;
  const std::size_t want = 2 * f.k + 2 + 2 * blocks;
  if (tok.size() != want)
    throw GoldenDataError(fmt::format("{}:{}: {} fields, the header's formats need {} (2*K + c + {}d)",
                                      f.path.string(), line, tok.size(), want, blocks ? "scales + " : ""));
  MmaSimCase c;
  c.line = line;
  std::size_t i = 0;
  auto field = [&](const MmaSimFormat& fmt_, const char* what) {
    const std::uint64_t bits = parse_hex(tok[i], fmt_.digits, f.path, line, fmt::format("{}[{}]", what, i));
    ++i;
    return bits;
  };
  for (std::size_t k = 0; k < f.k; ++k) c.a.push_back(decode(f.a, field(f.a, "a")));
  for (std::size_t k = 0; k < f.k; ++k) c.b.push_back(decode(f.b, field(f.b, "b")));
  c.c = decode(f.c, field(f.c, "c"));
  for (std::size_t j = 0; j < blocks; ++j) c.sa.push_back(decode(*f.scale, field(*f.scale, "scale_a")));
  for (std::size_t j = 0; j < blocks; ++j) c.sb.push_back(decode(*f.scale, field(*f.scale, "scale_b")));
  c.d_bits = field(f.d, "d");
  f.cases.push_back(std::move(c));
}

}  // namespace

bool is_mma_sim_file(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  for (int i = 0; i < 3 && std::getline(in, line); ++i)
    if (line.rfind("# source: microsoft/MMA-Sim", 0) == 0) return true;
  return false;
}

std::vector<fs::path> mma_sim_files(const fs::path& file_or_dir) {
  if (!fs::is_directory(file_or_dir)) {
    if (!fs::exists(file_or_dir))
      throw GoldenDataError(fmt::format("'{}' does not exist", file_or_dir.string()));
    if (!is_mma_sim_file(file_or_dir))
      throw GoldenDataError(
          fmt::format("'{}' is not an MMA-Sim vector file (no '# source: microsoft/MMA-Sim' "
                      "header line)",
                      file_or_dir.string()));
    return {file_or_dir};
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(file_or_dir))
    if (e.is_regular_file() && e.path().extension() == ".txt" && is_mma_sim_file(e.path()))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

MmaSimFile load_mma_sim_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw GoldenDataError(fmt::format("cannot open '{}'", path.string()));
  MmaSimFile f;
  f.path = path;
  Header h;
  std::string line;
  std::size_t n = 0;
  bool header_done = false;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line[0] == '#') {
      if (header_done)
        throw GoldenDataError(fmt::format("{}:{}: header line after the first case", path.string(), n));
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string key = line.substr(1, colon - 1), value = line.substr(colon + 1);
        key.erase(0, key.find_first_not_of(' '));
        value.erase(0, value.find_first_not_of(' '));
        h.emplace(key, value);
      }
      continue;
    }
    if (!header_done) read_header(f, h);
    header_done = true;
    read_case(f, line, n);
  }
  if (!header_done) throw GoldenDataError(fmt::format("{}: no cases", path.string()));
  if (const auto it = h.find("cases");
      it != h.end() && first_word(it->second) != std::to_string(f.cases.size()))
    throw GoldenDataError(fmt::format("{}: header says {} cases, the file has {}", path.string(),
                                      first_word(it->second), f.cases.size()));
  return f;
}

MmaSimTarget mma_sim_target(const MmaSimFile& file) {
  // Architecture -> preset: MMA-Sim's architecture names (its nv_ptx and amd
  // tables) and the rpsim preset of that generation.
  static const std::map<std::string, std::string> presets = {
      {"Volta", "v100"},  {"Turing", "t4"},      {"Ampere", "a100"},           {"Ada Lovelace", "ada"},
      {"Hopper", "h100"}, {"Blackwell", "b200"}, {"RTX Blackwell", "rtx5090"}, {"CDNA1", "mi100"},
      {"CDNA2", "mi250"}, {"CDNA3", "mi300"},
  };
  static const std::map<std::string, TensorCoreInstruction> instructions = {
      {"mma", tc_mma_sync},
      {"wgmma", tc_wgmma},
      {"tcgen05mma", tc_tcgen05},
      {"mma_block_scale", tc_mma_sync},
      {"tcgen05mma_block_scale", tc_tcgen05},
      {"mfma", tc_mfma},
  };
  MmaSimTarget t;
  if (const auto it = presets.find(file.arch); it != presets.end()) t.preset = it->second;
  if (const auto it = instructions.find(file.family); it != instructions.end()) t.instruction = it->second;
  // CDNA1/2's bf16 "_1k" instructions are their own datapath (4-product
  // groups instead of 2: MMA-Sim's amd.mfma).
  if (t.instruction == tc_mfma && file.qualifier.size() > 3 &&
      file.qualifier.compare(file.qualifier.size() - 3, 3, "_1k") == 0)
    t.instruction = tc_mfma_1k;
  return t;
}

std::optional<TensorCoreModel> mma_sim_model(const MmaSimFile& file, std::string& why) {
  const MmaSimTarget t = mma_sim_target(file);
  if (t.preset.empty() || !t.instruction) {
    why = fmt::format("no preset for architecture '{}' family '{}'", file.arch, file.family);
    return std::nullopt;
  }
  const auto& names = tensor_core_preset_names();
  if (std::find(names.begin(), names.end(), t.preset) == names.end()) {
    why = fmt::format("no preset '{}' yet", t.preset);
    return std::nullopt;
  }
  try {
    return tensor_core_preset(t.preset, file.a.format, file.d.format, *t.instruction, file.b.format,
                              file.scale ? &file.scale->format : nullptr, static_cast<int>(file.block_size));
  } catch (const std::invalid_argument& e) {
    why = e.what();
    return std::nullopt;
  }
}

MmaSimCheck check_mma_sim(const MmaSimFile& file, const TensorCoreModel& model, std::size_t show) {
  MmaSimCheck r;
  const Format& out = file.d.format;
  for (const auto& gc : file.cases) {
    const std::uint64_t got = tensor_core_dot_bits(model, gc.a, gc.b, gc.c, gc.sa, gc.sb);
    const double want = to_double(out, gc.d_bits);
    bool ok = got == gc.d_bits;
    if (!ok && file.nan_any) ok = std::isnan(want) && std::isnan(to_double(out, got));
    ++r.total;
    if (ok) {
      ++r.passed;
      continue;
    }
    r.mismatch_lines.push_back(gc.line);
    if (r.first_mismatches.size() < show) {
      const int w = (out.bits + 3) / 4;
      r.first_mismatches.push_back(fmt::format("line {}: c={} expected {:0{}x} ({}) got {:0{}x} ({})",
                                               gc.line, gc.c, gc.d_bits, w, want, got, w,
                                               to_double(out, got)));
    }
  }
  return r;
}

}  // namespace rpsim::sim
