// Checking a dumped GEMM against a model (gemm_check.hpp).
#include "rpsim/validation/gemm_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/io/npy.hpp"
#include "rpsim/io/text_matrix.hpp"

namespace rpsim::sim {

namespace {

// The letter an array name stands for: "A", "a", "run_A", "x-d" ...; 0 when none.
char array_letter(const std::string& name) {
  if (name.empty()) return 0;
  const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(name.back())));
  if (last != 'A' && last != 'B' && last != 'C' && last != 'D') return 0;
  if (name.size() == 1) return last;
  const char sep = name[name.size() - 2];
  return sep == '_' || sep == '-' || sep == '.' ? last : 0;
}

Matrix to_matrix(const io::NumericArray& x, const std::string& where) {
  if (x.shape.size() != 2) {
    std::vector<std::string> dims;
    for (const auto d : x.shape) dims.push_back(std::to_string(d));
    throw GemmDumpError(fmt::format("{}: a matrix needs 2 dimensions, the array has shape ({})", where,
                                    fmt::join(dims, ", ")));
  }
  if (x.shape[0] == 0 || x.shape[1] == 0)
    throw GemmDumpError(fmt::format("{}: the array is empty ({} x {})", where, x.shape[0], x.shape[1]));
  Matrix m(static_cast<Eigen::Index>(x.shape[0]), static_cast<Eigen::Index>(x.shape[1]));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      m(i, j) = x.values[static_cast<std::size_t>(i * m.cols() + j)];
  return m;
}

struct Found {
  std::map<char, io::NumericArray> arrays;
  std::map<char, std::string> where;
  std::map<std::string, io::NumericArray> scales;  // "sfa" ... by lower-case name
};

// The scale arrays a dump may carry (gemm.hpp GemmScales), by lower-case name.
constexpr const char* kScaleArrays[] = {"sfa", "sfb", "scale_a", "scale_b"};

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

void add_array(Found& f, io::NumericArray x, const std::string& file) {
  const std::string name = lower(x.name);
  for (const char* s : kScaleArrays)
    if (name == s) {
      if (f.scales.count(name)) throw GemmDumpError(fmt::format("{}: a second array {}", file, x.name));
      f.scales.emplace(name, std::move(x));
      return;
    }
  const char letter = array_letter(x.name);
  if (!letter) return;  // another array the dump carries: not ours to read
  const std::string where = fmt::format("{}: {}", file, x.name);
  if (f.arrays.count(letter))
    throw GemmDumpError(
        fmt::format("{}: a second array for {} (the first is {})", where, letter, f.where[letter]));
  f.where[letter] = where;
  f.arrays.emplace(letter, std::move(x));
}

void check_shapes(const GemmDump& d) {
  if (d.a.cols() != d.b.rows())
    throw GemmDumpError(fmt::format("{} is {}x{} but {} is {}x{} (A's columns must equal B's rows)",
                                    d.array_source('A'), d.a.rows(), d.a.cols(), d.array_source('B'),
                                    d.b.rows(), d.b.cols()));
  const auto check = [&](const Matrix& m, char name) {
    if (m.rows() != d.a.rows() || m.cols() != d.b.cols())
      throw GemmDumpError(fmt::format("{} is {}x{} but A*B is {}x{}", d.array_source(name), m.rows(),
                                      m.cols(), d.a.rows(), d.b.cols()));
  };
  check(d.d, 'D');
  if (d.c) check(*d.c, 'C');
}

// Inputs (A, B, C) must be finite under every model: kernel presets
// reproduce a library fitted on finite data only, and under the others a NaN
// or infinity in an input makes whole rows and columns of D non-finite,
// where a bit-for-bit comparison says nothing about the arithmetic (and an
// ulp distance is infinite). D may hold infinities (an overflow).
void check_values(const GemmDump& dump, const Matrix& m, char name, const Format& f, bool finite,
                  const char* role) {
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      const double x = m(i, j);
      if (finite && !std::isfinite(x))
        throw GemmDumpError(
            fmt::format("{}[{}, {}] = {}: gemm-check takes finite inputs only (NaN and infinity in A, B "
                        "or C make D's rows and columns non-finite whatever the arithmetic)",
                        dump.array_source(name), i, j, x));
      if (std::isnan(x)) continue;
      const double r = to_double(f, round_double(f, x, RoundingMode::nearest_even));
      if (r != x)
        throw GemmDumpError(fmt::format("{}[{}, {}] = {} is not a {} value (the model's {} format)",
                                        dump.array_source(name), i, j, x, f.name, role));
    }
}

}  // namespace

std::string GemmDump::array_source(char name) const {
  const auto it = sources.find(name);
  return it != sources.end() ? it->second : fmt::format("{}: {}", source, name);
}

GemmDump load_gemm_dump(const std::vector<std::filesystem::path>& files, DumpFormat format) {
  if (files.empty()) throw GemmDumpError("no dump file given");
  Found found;
  for (const auto& path : files) {
    if (format == DumpFormat::text) {
      add_array(found, io::read_text_matrix(path, false), path.string());
      continue;
    }
    try {
      for (auto& x : io::read_array_file(path)) add_array(found, std::move(x), path.string());
    } catch (const io::ArrayFileError& e) {
      throw GemmDumpError(e.what());
    }
  }
  GemmDump d;
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.string());
  d.source = fmt::format("{}", fmt::join(names, " "));
  d.sources = found.where;
  for (const char need : {'A', 'B', 'D'})
    if (!found.arrays.count(need))
      throw GemmDumpError(
          fmt::format("{}: no array {} (a dump holds A, B, D and optionally C, named by "
                      "the .npz member or the file stem: A.npy, run_A.npy)",
                      d.source, need));
  d.a = to_matrix(found.arrays['A'], found.where['A']);
  d.b = to_matrix(found.arrays['B'], found.where['B']);
  d.d = to_matrix(found.arrays['D'], found.where['D']);
  d.d_dtype = found.arrays['D'].dtype;
  if (found.arrays.count('C')) d.c = to_matrix(found.arrays['C'], found.where['C']);
  for (auto& [name, x] : found.scales) {
    const std::string where = fmt::format("{}: {}", d.source, x.name);
    // scale_a / scale_b may be 0-D (one per tensor) or 1-D (per row / column).
    if (x.shape.size() < 2)
      x.shape = name == "scale_a" ? std::vector<std::size_t>{x.values.size(), 1}
                                  : std::vector<std::size_t>{1, x.values.size()};
    Matrix m = to_matrix(x, where);
    (name == "sfa"       ? d.scales.sfa
     : name == "sfb"     ? d.scales.sfb
     : name == "scale_a" ? d.scales.scale_a
                         : d.scales.scale_b) = std::move(m);
  }
  check_shapes(d);
  return d;
}

Format model_b_format(const AccumulationModel& model) {
  const auto& v = model.variant();
  if (const auto* p = std::get_if<KernelPreset>(&v)) return p->input_b.value_or(model.input_format());
  if (const auto* s = std::get_if<KernelSchedule>(&v))
    if (s->instruction.input_b) return *s->instruction.input_b;
  return model.input_format();
}

void check_dump_formats(const GemmDump& dump, const AccumulationModel& model) {
  check_values(dump, dump.a, 'A', model.input_format(), true, "input");
  check_values(dump, dump.b, 'B', model_b_format(model), true, "input");
  try {
    check_gemm_scales(model, dump.a.rows(), dump.a.cols(), dump.b.cols(), dump.scales);
  } catch (const std::invalid_argument& e) {
    throw GemmDumpError(fmt::format("{}: {}", dump.source, e.what()));
  }
  if (dump.c) check_values(dump, *dump.c, 'C', model.output_format(), true, "output");
  check_values(dump, dump.d, 'D', model.output_format(), false, "output");
}

bool same_encoding(double expected, double got, const Format&) {
  if (std::isnan(expected) || std::isnan(got)) return std::isnan(expected) && std::isnan(got);
  return expected == got && std::signbit(expected) == std::signbit(got);
}

namespace {

// The signed position of x among the output format's values (0 for +-0, 1
// for the smallest subnormal, 2^man for the smallest normal, ...), so that a
// difference of positions counts the representable values between two
// results; fractional for values not in the format.
double ordinal(double x, const Format& out) {
  const double mag = std::fabs(x);
  const double scale = std::ldexp(1.0, out.man_bits);
  double pos = mag / std::ldexp(1.0, out.emin - out.man_bits);  // subnormal range
  if (mag >= std::ldexp(1.0, out.emin)) {
    int e = 0;
    std::frexp(mag, &e);
    --e;  // mag in [2^e, 2^(e+1))
    pos = (e - out.emin + 1) * scale + (std::ldexp(mag, -e) - 1) * scale;
  }
  return std::signbit(x) ? -pos : pos;
}

}  // namespace

double ulp_difference(double expected, double got, const Format& out) {
  if (!std::isfinite(expected) || !std::isfinite(got)) {
    const bool same = (std::isnan(expected) && std::isnan(got)) || expected == got;
    return same ? 0.0 : std::numeric_limits<double>::infinity();
  }
  return ordinal(got, out) - ordinal(expected, out);
}

GemmCheckResult check_gemm(const GemmDump& dump, const AccumulationModel& model, std::size_t show,
                           int threads) {
  GemmCheckResult r;
  r.model = model.spec();
  if (const auto* p = std::get_if<KernelPreset>(&model.variant())) {
    r.schedule = AccumulationModel(p->for_shape(dump.a.rows(), dump.b.cols(), dump.a.cols())).spec();
    r.schedule_source = p->source(dump.a.rows(), dump.b.cols(), dump.a.cols());
  }
  const Matrix c = dump.c ? *dump.c : Matrix::Zero(dump.d.rows(), dump.d.cols());
  r.got = gemm(model, dump.a, dump.b, c, dump.scales, GemmOptions{threads});
  const Format& out = model.output_format();
  double sum = 0;
  for (Eigen::Index i = 0; i < dump.d.rows(); ++i)
    for (Eigen::Index j = 0; j < dump.d.cols(); ++j) {
      const double want = dump.d(i, j), got = r.got(i, j);
      const double u = std::fabs(ulp_difference(want, got, out));
      ++r.total;
      r.max_ulps = std::max(r.max_ulps, u);
      sum += u;
      if (same_encoding(want, got, out)) {
        ++r.passed;
      } else if (r.first.size() < show) {
        r.first.push_back({i, j, want, got, ulp_difference(want, got, out)});
      }
    }
  r.mean_ulps = r.total ? sum / static_cast<double>(r.total) : 0;
  return r;
}

}  // namespace rpsim::sim
