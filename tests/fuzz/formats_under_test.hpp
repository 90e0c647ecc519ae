// The formats a differential fuzzer draws from: every named format plus the
// fuzzer's own spec strings (the shapes the named table lacks).
#pragma once

#include <span>
#include <vector>

#include "rpsim/formats/format.hpp"

namespace rpsim::fuzz {

inline std::vector<const Format*> named_and_custom_formats(std::span<const char* const> specs) {
  std::vector<const Format*> v;
  for (const Format& f : named_formats()) v.push_back(&f);
  for (const char* spec : specs) v.push_back(&format(spec));
  return v;
}

}  // namespace rpsim::fuzz
