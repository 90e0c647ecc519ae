// Duplicate keys in JSON text. nlohmann::json (like Python's json and most
// readers) keeps the last of two equal keys of one object, so a config with
// "policy": "fp16-amp", ..., "policy": "bf16-amp" trained bf16-amp without a
// word (issue #36). Every reader of a JSON file or argument (configs, study
// and sweep files, policy JSON inside them, --set values, GEMM manifests,
// tc-golden conventions.json, accumulation specs from Python) checks its
// text with this after parsing it, and refuses a duplicate with its own error
// type, naming the file and the key.
#pragma once

#include <string>

namespace rpsim::io {

// The first key that appears twice in one object of `text`, as its path
// ("policy", "optimizer.lr", "gemms[2].file"); "" when there is none, or when
// `text` is not valid JSON (its parser says why).
std::string duplicate_json_key(const std::string& text);

// "\"KEY\" is given twice in one object (a JSON reader keeps only the last): keep one"
std::string duplicate_json_key_message(const std::string& key);

}  // namespace rpsim::io
