// Recipe rows against reference vector files (recipe_check.hpp).
#include "rpsim/formats/recipe_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace rpsim {

namespace {

using recipe::ElementKind;

// A whitespace-separated line of fixed-width hexadecimal fields.
struct Fields {
  std::vector<std::string> f;
  std::size_t next = 0;
  const std::string& where;
  std::uint32_t read(std::size_t width, const char* field, std::size_t i) {
    const std::string& s = f.at(next++);
    std::uint32_t v = 0;
    bool ok = s.size() == width;
    for (char c : s) {
      const int d = c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1);
      ok = ok && d >= 0;
      v = v * 16 + std::uint32_t(d < 0 ? 0 : d);
    }
    if (!ok)
      throw std::invalid_argument(
          fmt::format("{}: {}[{}] '{}' is not {} lower-case hex digits", where, field, i, s, width));
    return v;
  }
};

bool f32_nan(std::uint32_t b) {
  return (b & 0x7fffffffu) > 0x7f800000u;
}

// E4M3 NaN is S.1111.111; E5M2 NaN S.11111.xx with xx != 0.
bool code_nan(ElementKind k, std::uint32_t c) {
  if (k == ElementKind::e4m3) return (c & 0x7fu) == 0x7fu;
  if (k == ElementKind::e5m2) return (c & 0x7fu) > 0x7cu;
  return false;
}

struct Case {
  std::string line;
  std::string failure;  // empty: passed
  void differ(const char* field, std::size_t i, std::uint32_t got, std::uint32_t want) {
    if (failure.empty()) failure = fmt::format("{}: {}[{}] got {:x} want {:x}", line, field, i, got, want);
  }
};

void compare(const Quantized& q, Fields& in, Case& c) {
  const QuantSpec& s = q.spec;
  const bool fp8 = s.family == ScaleFamily::fp8, mx = s.family == ScaleFamily::mx;
  const bool narrow = !recipe::is_fp8(s.element) && s.element != ElementKind::int8;
  const std::size_t code_width = s.element == ElementKind::e2m1 ? 1 : 2;
  const std::size_t first_code = in.next;
  in.next += q.codes.size();
  std::vector<std::uint32_t> want_scales;
  for (std::size_t i = 0; i < q.scales.size(); ++i) {
    const std::uint32_t want = in.read(fp8 ? 8 : 2, "s", i);
    want_scales.push_back(want);
    const std::uint32_t got = fp8 ? recipe::f32_bits(q.scales[i]) : q.scale_codes[i];
    const bool equal =
        got == want || (fp8 ? f32_nan(got) && f32_nan(want)
                            : !mx && code_nan(ElementKind::e4m3, got) && code_nan(ElementKind::e4m3, want));
    if (!equal) c.differ("s", i, got, want);
  }
  for (std::size_t i = 0; i < q.amax.size(); ++i) {
    const std::uint32_t want = in.read(8, "amax", i), got = recipe::f32_bits(q.amax[i]);
    if (got != want && !(f32_nan(got) && f32_nan(want))) c.differ("amax", i, got, want);
  }
  const std::size_t end = in.next;
  in.next = first_code;
  const std::size_t tw = s.tile_cols ? std::size_t(s.tile_cols) : q.cols,
                    th = s.tile_rows ? std::size_t(s.tile_rows) : q.rows;
  for (std::size_t i = 0; i < q.codes.size(); ++i) {
    const std::uint32_t want = in.read(code_width, "q", i), got = q.codes[i];
    const std::size_t tile = (i / q.cols / th) * q.scale_cols + (i % q.cols) / tw;
    // FP4 / FP6 codes of an MX block the reference scales by NaN: don't-care.
    if (mx && narrow && want_scales[tile] == 0xff) continue;
    if (got != want && !(code_nan(s.element, got) && code_nan(s.element, want))) c.differ("q", i, got, want);
  }
  in.next = end;
}

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> f;
  for (std::string w; in >> w;) f.push_back(w);
  return f;
}

// The `call:` line of the header.
std::string call_of(std::ifstream& in, const std::string& file) {
  std::string line;
  while (std::getline(in, line) && !line.empty() && line[0] == '#')
    if (line.rfind("# call: ", 0) == 0) return line.substr(8);
  throw std::invalid_argument(fmt::format("{}: no '# call: ' line in the header", file));
}

}  // namespace

RecipeFileCheck check_recipe_file(const std::filesystem::path& path, std::size_t show) {
  const std::string file = path.string();
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open", file));
  RecipeFileCheck r;
  r.file = path;
  std::size_t rows = 0, cols = 0;
  QuantSpec spec;
  try {
    std::tie(r.recipe, r.options) = recipe_for_call(call_of(in, file), &rows, &cols);
    spec = recipe_spec(r.recipe, r.options);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", file, e.what()));
  }
  in.clear();
  in.seekg(0);
  std::string line;
  std::vector<float> x(rows * cols);
  // The fields of a line: the input and what the recipe makes of it.
  const Quantized shape = quantize(spec, x, rows, cols);
  const std::size_t want = x.size() + shape.codes.size() + shape.scales.size() + shape.amax.size();
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::string where = fmt::format("{}:{}", file, number);
    Fields f{split(line), 0, where};
    if (f.f.size() != want)
      throw std::invalid_argument(
          fmt::format("{}: {} fields, the recipe's outputs make {}", where, f.f.size(), want));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = recipe::f32_from_bits(f.read(8, "x", i));
    const Quantized q = quantize(spec, x, rows, cols);
    Case c{fmt::format("line {}", number), {}};
    compare(q, f, c);
    if (c.failure.empty()) {
      ++r.passed;
    } else {
      ++r.failed;
      if (r.first_failures.size() < show) r.first_failures.push_back(c.failure);
    }
  }
  return r;
}

std::vector<std::filesystem::path> recipe_files(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw std::invalid_argument(fmt::format("{}: no such file or folder", path.string()));
  if (!std::filesystem::is_directory(path, ec)) return {path};
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(path))
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::invalid_argument(fmt::format("{}: no *.txt vector files", path.string()));
  return files;
}

}  // namespace rpsim
