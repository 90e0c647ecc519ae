// One row per name: the overflow behaviours and the NaN policies
// (behaviour_names.hpp). An alias is a row of its own, left out of the list
// messages give.
#include "rpsim/formats/behaviour_names.hpp"

namespace rpsim {
namespace {

template <class T>
struct Named {
  std::string_view name;
  T value;
  bool alias = false;
};

constexpr Named<Overflow> kOverflow[] = {{"infinity", Overflow::infinity},
                                         {"inf", Overflow::infinity, true},
                                         {"nan", Overflow::nan},
                                         {"saturate", Overflow::saturate}};
constexpr Named<NanPolicy> kNanPolicy[] = {{"x86", NanPolicy::x86_sse},
                                           {"x86_sse", NanPolicy::x86_sse, true},
                                           {"arm", NanPolicy::arm},
                                           {"riscv", NanPolicy::riscv}};

template <class T, std::size_t N>
std::optional<T> find(const Named<T> (&rows)[N], std::string_view name) {
  for (const auto& r : rows)
    if (r.name == name) return r.value;
  return std::nullopt;
}

// "a, b or c" over the rows that are not aliases.
template <class T, std::size_t N>
std::string listed(const Named<T> (&rows)[N]) {
  std::string out, last;
  for (const auto& r : rows) {
    if (r.alias) continue;
    if (!last.empty()) out += out.empty() ? last : ", " + last;
    last = std::string(r.name);
  }
  return out.empty() ? last : out + " or " + last;
}

}  // namespace

std::optional<Overflow> overflow_named(std::string_view name) {
  return find(kOverflow, name);
}
std::optional<NanPolicy> nan_policy_named(std::string_view name) {
  return find(kNanPolicy, name);
}
std::string overflow_names() {
  return listed(kOverflow);
}
std::string nan_policy_names() {
  return listed(kNanPolicy);
}

}  // namespace rpsim
