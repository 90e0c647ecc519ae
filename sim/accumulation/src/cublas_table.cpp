// Offline cuBLASLt heuristic tables (cublas_table.hpp).
#include "rpsim/accumulation/cublas_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace rpsim::sim {

namespace {

// A cell: config << 17 | SPLITK_NUM << 5 | REDUCTION_SCHEME (15, 12 and 5 bits).
constexpr int kConfigShift = 17, kSplitShift = 5;
constexpr long kConfigMask = (1L << 15) - 1, kSplitMask = (1L << 12) - 1, kReductionMask = (1L << 5) - 1;

struct Reader {
  const std::filesystem::path& file;
  std::ifstream in;
  std::size_t line_no = 0;
  std::string line;

  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument(fmt::format("{}:{}: {}", file.string(), line_no, why));
  }
  bool next() {
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line[0] != '#') return true;
    }
    return false;
  }
  std::string word() const { return line.substr(0, line.find(' ')); }
  std::string rest() const {
    const auto sp = line.find(' ');
    return sp == std::string::npos ? "" : line.substr(sp + 1);
  }
};

long to_long(const Reader& r, const std::string& s, long lo, long hi) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi)
    r.fail(fmt::format("'{}' is not an integer in {}..{}", s, lo, hi));
  return v;
}

std::vector<long> axis(Reader& r, const char* name) {
  if (!r.next() || r.word() != name) r.fail(fmt::format("expected the '{}' axis", name));
  std::vector<long> v;
  std::istringstream in(r.rest());
  for (std::string w; in >> w;) v.push_back(to_long(r, w, 1, 1L << 40));
  if (v.empty() || !std::is_sorted(v.begin(), v.end()) || std::adjacent_find(v.begin(), v.end()) != v.end())
    r.fail(fmt::format("the '{}' axis must be increasing values", name));
  return v;
}

CublasTable::Config config_line(const Reader& r, std::size_t index) {
  std::istringstream in(r.rest());
  std::string w;
  in >> w;
  if (to_long(r, w, 0, kConfigMask) != long(index)) r.fail(fmt::format("config {} out of order", w));
  CublasTable::Config c;
  for (; in >> w;) {
    const auto eq = w.find('=');
    const std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (key == "kernel") {
      std::string more;
      std::getline(in, more);
      c.kernel = value + more;  // a demangled name may hold spaces: the rest of the line
      break;
    }
    int* field = key == "algo"     ? &c.algo_id
                 : key == "tile"   ? &c.tile_id
                 : key == "stages" ? &c.stages_id
                 : key == "custom" ? &c.custom_option
                                   : nullptr;
    if (!field) r.fail(fmt::format("config field '{}' is not algo, tile, stages, custom or kernel", key));
    *field = static_cast<int>(to_long(r, value, -1, 1L << 30));
  }
  return c;
}

// One (m, n) row: ENTRY or ENTRY*COUNT tokens, ENTRY = CONFIG.SPLITK.REDUCTION.
void row_line(const Reader& r, std::size_t k_count, std::size_t configs, std::vector<std::uint32_t>& cells) {
  std::istringstream in(r.line);
  std::size_t got = 0;
  for (std::string w; in >> w;) {
    const auto star = w.find('*');
    const long count = star == std::string::npos ? 1 : to_long(r, w.substr(star + 1), 1, long(k_count));
    const std::string e = w.substr(0, star);
    const auto d1 = e.find('.'), d2 = e.find('.', d1 + 1);
    if (d1 == std::string::npos || d2 == std::string::npos) r.fail(fmt::format("'{}' is not C.S.R", e));
    const long c = to_long(r, e.substr(0, d1), 0, long(configs) - 1);
    // SPLITK 0: no algorithm. The H200's cuBLASLt (13.1) answers up to 396 slices at thin shapes, and
    // 4294967295 (-1 as the uint32 it is read as) for sm90_xmma tf32 kernels that pick their split at
    // run time: kept as kSplitMask, "not a count".
    const long s = std::min(to_long(r, e.substr(d1 + 1, d2 - d1 - 1), 0, 4294967295L), kSplitMask);
    const long red = to_long(r, e.substr(d2 + 1), 0, kReductionMask);
    for (long i = 0; i < count; ++i)
      cells.push_back(std::uint32_t(c) << kConfigShift | std::uint32_t(s) << kSplitShift |
                      std::uint32_t(red));
    got += std::size_t(count);
  }
  if (got != k_count) r.fail(fmt::format("{} entries where the k axis has {}", got, k_count));
}

// The index of the value nearest v in log2 among those `keep` accepts (all
// when none does).
template <class Keep>
std::size_t nearest(const std::vector<long>& axis, long v, Keep keep) {
  const bool any = std::any_of(axis.begin(), axis.end(), keep);
  std::size_t best = 0;
  double best_d = INFINITY;
  const double lv = std::log2(double(std::max(v, 1L)));
  for (std::size_t i = 0; i < axis.size(); ++i) {
    if (any && !keep(axis[i])) continue;
    const double d = std::fabs(std::log2(double(axis[i])) - lv);
    if (d < best_d) best_d = d, best = i;
  }
  return best;
}

}  // namespace

CublasTable CublasTable::read(const std::filesystem::path& file) {
  Reader r{file, std::ifstream(file), 0, {}};
  if (!r.in) throw std::invalid_argument(fmt::format("{}: cannot read the cuBLAS table", file.string()));
  CublasTable t;
  t.file = file;
  if (!r.next() || r.line != "rpsim-cublas-table 1") r.fail("not an rpsim-cublas-table 1 file");
  while (r.next()) {
    const std::string w = r.word();
    if (w == "end") return t;
    if (w == "gpu")
      t.gpu = r.rest();
    else if (w == "library")
      t.library = r.rest();
    else if (w == "spec")
      continue;
    else if (w == "config")
      t.configs.push_back(config_line(r, t.configs.size()));
    else if (w == "kind") {
      const std::string name = r.rest();
      if (t.kinds_.count(name)) r.fail(fmt::format("kind '{}' twice", name));
      Kind k;
      k.m = axis(r, "m"), k.n = axis(r, "n"), k.k = axis(r, "k");
      k.cells.reserve(k.m.size() * k.n.size() * k.k.size());
      for (std::size_t i = 0; i < k.m.size() * k.n.size(); ++i) {
        if (!r.next())
          r.fail(fmt::format("kind '{}' ends after {} of {} rows", name, i, k.m.size() * k.n.size()));
        row_line(r, k.k.size(), t.configs.size(), k.cells);
      }
      t.kinds_.emplace(name, std::move(k));
    } else {
      r.fail(fmt::format("'{}' is not gpu, library, spec, config, kind or end", w));
    }
  }
  r.fail("no 'end' line (a truncated file?)");
}

std::optional<CublasRecord> CublasTable::lookup(std::string_view kind, long m, long n, long k,
                                                bool* exact) const {
  const auto it = kinds_.find(kind);
  if (it == kinds_.end()) return std::nullopt;
  const Kind& t = it->second;
  const auto all = [](long) { return true; };
  const std::size_t i = nearest(t.m, m, all), j = nearest(t.n, n, all);
  const std::size_t l = nearest(t.k, k, [&](long v) { return (v % 8 == 0) == (k % 8 == 0); });
  if (exact) *exact = t.m[i] == m && t.n[j] == n && t.k[l] == k;
  const std::uint32_t cell = t.cells[(i * t.n.size() + j) * t.k.size() + l];
  if ((cell >> kSplitShift & kSplitMask) == 0) return std::nullopt;  // cuBLASLt had no algorithm there
  const Config& c = configs[cell >> kConfigShift];
  CublasRecord rec;
  rec.algo_id = c.algo_id, rec.tile_id = c.tile_id, rec.stages_id = c.stages_id;
  rec.custom_option = c.custom_option;
  const long split = long(cell >> kSplitShift & kSplitMask);
  if (split != kSplitMask) rec.splitk_num = int(split);
  rec.reduction_scheme = int(cell & kReductionMask);
  if (!c.kernel.empty()) rec.kernels.push_back({c.kernel, {0, 0, 0}});
  return rec;
}

std::vector<std::string> CublasTable::kinds() const {
  std::vector<std::string> out;
  for (const auto& [name, k] : kinds_) out.push_back(name);
  return out;
}

std::size_t CublasTable::entries() const {
  std::size_t n = 0;
  for (const auto& [name, k] : kinds_) n += k.cells.size();
  return n;
}

std::filesystem::path cublas_table_path(std::string_view gpu) {
  const std::string name = fmt::format("cublas-{}.txt", gpu);
  if (const char* dir = std::getenv("RPSIM_CUBLAS_TABLES"); dir && *dir)
    return std::filesystem::path(dir) / name;
  return std::filesystem::path(RPSIM_CUBLAS_TABLES_DIR) / name;
}

const CublasTable* cublas_table(std::string_view gpu) {
  // Cached by path: RPSIM_CUBLAS_TABLES set later in the process is seen.
  static std::mutex mutex;
  static std::map<std::filesystem::path, CublasTable> tables;
  const auto path = cublas_table_path(gpu);
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = tables.find(path);
  if (it == tables.end()) {
    if (!std::filesystem::exists(path)) return nullptr;  // not remembered: a table may be written later
    it = tables.emplace(path, CublasTable::read(path)).first;
  }
  return &it->second;
}

}  // namespace rpsim::sim
