// The keys of a configuration as tables of rows (name, type, help; the
// section is the table the row is in), and the one check made from them:
// unknown keys, each with the nearest names the config could have meant
// ("did you mean") and, where another vocabulary has the key (a DeepSpeed
// name in an rpsim config or the reverse), the name this config's vocabulary
// uses for it; and values of the wrong JSON type. Every problem is reported
// at once, once, as "path: why" (the loader prefixes the file).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

// The error and the name suggestions are the simulator's (its tables' own
// errors use them too): one type whichever layer throws.
using train::ConfigError;
using train::did_you_mean;
using train::nearest_names;

// The problems found in one configuration. ConfigError lists them all.
class KeyReport {
 public:
  // The vocabulary the config is written in (a file row of
  // framework_vocabularies(), rpsim's own by default): a key of another one
  // gets a hint naming this one's key.
  explicit KeyReport(std::string vocabulary = "rpsim") : vocabulary_(std::move(vocabulary)) {}

  // `path` is the dotted key, `known` the names allowed beside it.
  void unknown(const std::string& path, const std::vector<std::string>& known);
  void problem(const std::string& message) { problems_.push_back(message); }
  bool empty() const { return problems_.empty(); }
  const std::vector<std::string>& problems() const { return problems_; }
  const std::string& vocabulary() const { return vocabulary_; }
  // Throws ConfigError: the one problem, or "N problems:" and one per line.
  void throw_if_any() const;

 private:
  std::string vocabulary_;
  std::vector<std::string> problems_;
};

// Every key of object `j` that is not in `known` goes to `report`; false when
// `j` is not an object (reported too). For tables without types (a sweep
// file's keys, a framework's vocabulary, which its translation reads).
bool check_object_keys(const nlohmann::json& j, const std::vector<std::string>& known,
                       const std::string& path, KeyReport& report);

// The JSON type a key's value must have. Ranges and names (lr >= 0, a known
// format) are the reader's: they need the value, not only its type.
enum class KeyType {
  any,             // read by a table of its own (a DeepSpeed schedule)
  text,            // a string
  integer,         // an integer (2.0 counts)
  number,          // any number
  flag,            // true or false
  integers,        // a list of integers
  numbers,         // a list of numbers
  texts,           // a list of strings
  list,            // a non-empty list (a model's layers)
  object,          // an object: a section with its own table
  text_or_object,  // a name, or an object refining it (a policy)
  text_or_null,    // a name, or null (master_weights: none)
  accumulation,    // an accumulation model spec string or object
};

// One row of a key table.
struct KeySpec {
  const char* name;
  KeyType type;
  const char* help;
};

// "a number", "a list of integers", ...: as messages and help say it.
std::string type_phrase(KeyType type);
// Whether `v` has `type` (the elements of a list included).
bool has_type(const nlohmann::json& v, KeyType type);

// The check of one object against its table: every key of `j` not in `keys`
// (nor in `also_known`) is unknown, every value of the wrong type is wrong;
// both go to `report`. False when `j` is not an object (reported too). The
// caller looks inside a value only where has_type holds.
bool check_keys(const nlohmann::json& j, std::span<const KeySpec> keys, const std::string& path,
                KeyReport& report, const std::vector<std::string>& also_known = {});

// The rows of a table whose rows start with a KeySpec `key` member.
template <class Row>
std::vector<KeySpec> key_specs(std::span<const Row> rows) {
  std::vector<KeySpec> out;
  for (const Row& r : rows) out.push_back(r.key);
  return out;
}

}  // namespace rpsim::sim::config
