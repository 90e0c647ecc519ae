// The nearest known names to a misspelt one, for every error that lists
// names (unknown keys, policies, ops).
#include "rpsim/train/config_error.hpp"

#include <algorithm>
#include <cctype>

namespace rpsim::sim::train {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of two neighbours, each costing 1 (the usual typing slips).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::vector<std::string> nearest_names(std::string_view name, const std::vector<std::string>& known,
                                       std::size_t count) {
  const std::string n = lower(name);
  // A slip every four letters or so; a name inside another (scale in
  // init_scale) counts as near when it is not trivially short.
  const std::size_t limit = std::min<std::size_t>(3, 1 + n.size() / 4);
  std::vector<std::pair<std::size_t, std::string>> near;
  for (const std::string& k : known) {
    const std::string l = lower(k);
    std::size_t d = edit_distance(n, l);
    const bool inside =
        n.size() >= 5 && l.size() >= 5 && (l.find(n) != std::string::npos || n.find(l) != std::string::npos);
    if (inside) d = std::min(d, limit);
    if (d <= limit && d < std::max(n.size(), l.size())) near.emplace_back(d, k);
  }
  std::stable_sort(near.begin(), near.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  // Only the nearest and those one step further: a close match hides far ones.
  std::vector<std::string> out;
  for (const auto& [d, k] : near)
    if (out.size() < count && d <= near.front().first + 1 &&
        std::find(out.begin(), out.end(), k) == out.end())
      out.push_back(k);
  return out;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
  const auto near = nearest_names(name, known);
  if (near.empty()) return "";
  std::string list;
  for (std::size_t i = 0; i < near.size(); ++i)
    list += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + near[i];
  return " (did you mean " + list + "?)";
}

}  // namespace rpsim::sim::train
