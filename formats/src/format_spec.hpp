// The spec-string grammar of custom formats (internal to formats/).
#pragma once

#include <string_view>

#include "rpsim/formats/format.hpp"

namespace rpsim::detail {

// Fills `f` from a spec that names no table row ("e5m10", "e4m3fn",
// "exp=5,man=10,...", "q16.14", "fixed:16:14", "word=16,frac=14"); false when
// the text has none of these shapes, FormatError when it has one but a field
// is wrong. The caller calls finalize().
bool parse_spec(std::string_view spec, Format& f);

}  // namespace rpsim::detail
