// What a result's meta.json says about the run that made it.
#pragma once

#include <string>

namespace rpsim::io {

// The commit of the source tree this binary was built from (git rev-parse in
// that tree at run time), else $RPSIM_GIT_COMMIT, else "unknown".
std::string git_commit();

// The source tree this binary was built from (where its shipped configs and
// data live when it runs from a build folder).
std::string source_dir();

// Now, as ISO 8601 UTC ("2026-11-23T06:30:00Z").
std::string utc_timestamp();

}  // namespace rpsim::io
