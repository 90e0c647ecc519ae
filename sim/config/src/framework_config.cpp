// The vocabulary table (framework_config.hpp) and what reads it: which
// vocabulary a file is in, its translation, the hints that name a key in
// another vocabulary, the help. The rows are defined beside the code that
// reads each vocabulary (vocabulary_rows.hpp).
#include "rpsim/config/framework_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

#include "rpsim/config/config_keys.hpp"
#include "rpsim/train/config_error.hpp"
#include "vocabulary_rows.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

// rpsim's own vocabulary, the file row of a config no other row recognises:
// its translation is the inside rows' (Keras names, grad_scaler, fp8_recipe).
void translate_rpsim(Translation& t, KeyReport& report) {
  if (t.config.is_object()) translate_framework_names(t, report);  // else parse_config reports it
}

const FrameworkVocabulary kRpsim{
    .name = "rpsim",
    .framework = "rpsim",
    .scope = VocabularyScope::file,
    .read_as = "an rpsim config",
    .notes_heading = "framework names translated",
    .recognised_by = "any config no other file vocabulary recognises",
    .help = "rpsim's own keys (listed above), with the names the other rows lend it",
    .recognise = [](const json&) { return true; },
    .translate = translate_rpsim,
    .field_names = nullptr,
    .extension_keys = nullptr,
    .ignored = {},
    .refused = {},
};

// The framework rows, any added (AddedVocabulary), then rpsim's own.
std::vector<FrameworkVocabulary>& rows() {
  static std::vector<FrameworkVocabulary> table{deepspeed_vocabulary(), keras_vocabulary(),
                                                grad_scaler_vocabulary(), fp8_recipe_vocabulary(), kRpsim};
  return table;
}

}  // namespace

std::span<const FrameworkVocabulary> framework_vocabularies() {
  return rows();
}

const FrameworkVocabulary& framework_vocabulary(const std::string& name) {
  for (const auto& row : framework_vocabularies())
    if (name == row.name) return row;
  throw std::logic_error("no config vocabulary " + name);
}

const FrameworkVocabulary& recognise_vocabulary(const json& config) {
  for (const auto& row : framework_vocabularies())
    if (row.scope == VocabularyScope::file && row.recognise(config)) return row;
  return rows().back();  // not reached: rpsim's row, last, recognises every config
}

AddedVocabulary::AddedVocabulary(const FrameworkVocabulary& row) : name_(row.name) {
  for (const auto& r : framework_vocabularies())
    if (name_ == r.name) throw std::logic_error("config vocabulary " + name_ + " is in the table already");
  rows().insert(rows().end() - 1, row);
}

AddedVocabulary::~AddedVocabulary() {
  std::erase_if(rows(), [&](const FrameworkVocabulary& r) { return name_ == r.name; });
}

Translation translate_framework_config(const json& j, const std::string& vocabulary, KeyReport& report) {
  const FrameworkVocabulary& row = framework_vocabulary(vocabulary);
  Translation t;
  t.kind = row.name;
  t.config = j;
  row.translate(t, report);
  return t;
}

void translate_framework_names(Translation& t, KeyReport& report) {
  for (const auto& row : framework_vocabularies())
    if (row.scope == VocabularyScope::inside && row.recognise(t.config)) row.translate(t, report);
}

std::vector<std::string> framework_extension_keys() {
  std::vector<std::string> keys;
  for (const auto& row : framework_vocabularies())
    if (row.scope == VocabularyScope::inside && row.extension_keys)
      for (auto& k : row.extension_keys()) keys.push_back(std::move(k));
  return keys;
}

void ignore_unsimulated(const json& block, const std::string& path, std::span<const UnsimulatedField> fields,
                        Translation& t) {
  for (const auto& f : fields) {
    if (!block.is_object() || !block.contains(f.name)) continue;
    const std::string key = join(path, f.name);
    const json& v = block[f.name];
    if (f.neutral) {
      const bool on = v.is_object() ? v.contains("enabled") && boolean(v["enabled"], join(key, "enabled"))
                                    : boolean(v, key);
      if (on != *f.neutral)
        fail(v.is_object() ? join(key, "enabled") : key,
             fmt::format("{} is not simulated: {}; only {} is", on, f.why, *f.neutral));
    }
    t.ignored.push_back(key);
  }
}

namespace {

// `key` under the other names of `map`: framework -> rpsim (to_rpsim) or
// rpsim -> framework. "" when it has none.
std::string names_for(const std::string& key, const std::vector<FieldName>& map, bool to_rpsim) {
  std::vector<std::string> names;
  for (const auto& f : map) {
    const std::string& mine = to_rpsim ? f.framework : f.rpsim;
    const std::string& theirs = to_rpsim ? f.rpsim : f.framework;
    // A whole block (fp16) names the top-level keys its fields become.
    std::string name;
    if (mine == key) name = theirs;
    if (mine.rfind(key + ".", 0) == 0) {
      // As deep as the key asked about: fp16 -> loss_scaler, optimizer.params -> optimizer.lr.
      const auto depth = std::count(key.begin(), key.end(), '.');
      std::size_t cut = 0;
      for (long i = 0; i <= depth && cut != std::string::npos; ++i) cut = theirs.find('.', cut ? cut + 1 : 0);
      name = theirs.substr(0, cut);
    }
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// A key of rpsim's vocabulary written with an inside row's name
// (grad_scaler.init_scale) under rpsim's own (loss_scaler.init_scale).
std::string rpsim_name(const std::string& path) {
  for (const auto& row : framework_vocabularies()) {
    if (row.scope != VocabularyScope::inside || !row.field_names) continue;
    for (const auto& f : row.field_names())
      if (path == f.framework || path.rfind(f.framework + ".", 0) == 0)
        return f.rpsim + path.substr(f.framework.size());
  }
  return path;
}

bool in(std::span<const char* const> names, const std::string& s) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

}  // namespace

std::string vocabulary_hint(const std::string& path, const std::string& vocabulary) {
  const FrameworkVocabulary& mine = framework_vocabulary(vocabulary);
  if (mine.field_names) {
    // A framework's file: the key is rpsim's (or lent to rpsim's) name.
    const std::string name = names_for(rpsim_name(path), mine.field_names(), false);
    return name.empty() ? "" : fmt::format("this is {}, which calls it {}", mine.read_as, name);
  }
  // rpsim's own: the key is a framework's name.
  for (const auto& row : framework_vocabularies()) {
    if (row.scope != VocabularyScope::file || !row.field_names) continue;
    std::string name = names_for(path, row.field_names(), true);
    if (name.empty() && in(row.ignored, path)) name = "nothing (no meaning in a simulator)";
    if (!name.empty())
      return fmt::format("that is {}'s name; this config is in {}'s vocabulary, where it is {}",
                         row.framework, mine.framework, name);
  }
  return "";
}

namespace {

// `text` after `head`, wrapped at 100 columns under a hanging indent of `indent`.
std::string wrapped(const std::string& head, const std::string& text, std::size_t indent) {
  std::string out = head + std::string(indent > head.size() ? indent - head.size() : 1, ' ');
  std::size_t column = std::max(indent, head.size() + 1);
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (column > indent && column + 1 + word.size() > 100) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    start = end + 1;
  }
  return out + "\n";
}

// The unsimulated fields: `neutral` false those ignored at any value, true
// those ignored at their neutral value only (refused at another).
std::string unsimulated_text(std::span<const RefusedFields> refused, bool neutral) {
  std::vector<std::string> fields;
  for (const auto& block : refused)
    for (const auto& f : block.fields)
      if (f.neutral.has_value() == neutral)
        fields.push_back(neutral ? fmt::format("{} {}", join(block.block, f.name), *f.neutral)
                                 : join(block.block, f.name));
  return fmt::format("{}", fmt::join(fields, ", "));
}

}  // namespace

std::string framework_vocabularies_help() {
  std::string text =
      "Config vocabularies (a file is read in the first file vocabulary that recognises it; the others lend "
      "names to rpsim's):\n";
  constexpr std::size_t indent = 22;
  for (const auto& row : framework_vocabularies()) {
    const char* scope = row.scope == VocabularyScope::file ? "a file" : "inside rpsim's";
    text += wrapped(fmt::format("  {}", row.name), fmt::format("({}) {}", scope, row.help), indent);
    text += wrapped("", fmt::format("recognised by {}", row.recognised_by), indent);
    std::string ignored = fmt::format("{}", fmt::join(row.ignored, ", "));
    const std::string fields = unsimulated_text(row.refused, false);
    ignored += ignored.empty() || fields.empty() ? fields : ", " + fields;
    if (!ignored.empty()) text += wrapped("", "ignored (no meaning in a simulator): " + ignored, indent);
    const std::string neutral = unsimulated_text(row.refused, true);
    if (!neutral.empty())
      text += wrapped("", "ignored at the value given, refused at any other: " + neutral, indent);
  }
  return text;
}

}  // namespace rpsim::sim::config
