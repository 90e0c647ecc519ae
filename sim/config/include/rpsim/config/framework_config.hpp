// Recipes as users already wrote them for their framework, translated into an
// rpsim training config with the same meaning:
//  - a DeepSpeed config file (fp16/bf16 blocks, gradient_clipping, optimizer,
//    train_batch_size, gradient_accumulation_steps); fields that do not apply
//    to a simulator are listed as ignored, unknown fields are an error. rpsim
//    keys DeepSpeed has no name for (steps, epochs, model, data, seed, ...)
//    may stand beside them: the file stays a DeepSpeed file;
//  - Keras mixed-precision policy names (mixed_float16, mixed_bfloat16,
//    float32) as "policy";
//  - PyTorch GradScaler(...) keyword arguments as "grad_scaler";
//  - Transformer Engine DelayedScaling recipe fields as "fp8_recipe".
// Each vocabulary is one row of one table (framework_vocabularies()): how a
// config in it is recognised, its translation, its field names beside
// rpsim's, what it refuses and ignores, its help. The loader, the run plan's
// text, the unknown-key hints and `rpsim train --help` all read the rows:
// framework_config.cpp (the table and what reads it), deepspeed_config.cpp,
// deepspeed_blocks.cpp, framework_names.cpp (the rows).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rpsim::sim::config {

class KeyReport;

struct Translation {
  nlohmann::json config;             // an rpsim training config (parse_config's input)
  std::string kind = "rpsim";        // the vocabulary read: a row's name
  std::vector<std::string> ignored;  // fields read but meaningless in a simulator (with why)
  std::vector<std::string> notes;    // what each framework field became ("fp16.enabled -> policy fp16-amp")
};

// A framework field a simulator has no use for at its neutral value (the one
// at which it changes nothing in one process); another value would change the
// arithmetic, so it is refused by name rather than ignored (an ignored
// amsgrad=true, or TE's override_linear_precision, is another run, silently).
struct UnsimulatedField {
  const char* name;
  std::optional<bool> neutral;  // none: meaningless at every value
  const char* why;              // why another value is refused
};
// The unsimulated fields of one block of a vocabulary ("" the top level).
struct RefusedFields {
  const char* block;
  std::span<const UnsimulatedField> fields;
};

// The same field under a framework's name and rpsim's ("gradient_clipping",
// "max_grad_norm"). A name covers the fields under it: "fp16" names the
// top-level keys its fields become.
struct FieldName {
  std::string framework, rpsim;
};

enum class VocabularyScope {
  file,    // a whole config file is written in it (DeepSpeed's, rpsim's own)
  inside,  // names it lends to a file in rpsim's vocabulary (Keras policy names, "grad_scaler")
};

// One vocabulary a training config can be written in.
struct FrameworkVocabulary {
  const char* name;           // "deepspeed": LoadedConfig::vocabulary, Translation::kind, KeyReport
  const char* framework;      // "DeepSpeed": as error messages name it ("... DeepSpeed's name")
  VocabularyScope scope;      // a whole file, or names inside rpsim's
  const char* read_as;        // file rows: the run plan's "read as a DeepSpeed config", the hints'
  const char* notes_heading;  // file rows: the run plan's line above what the translation did
  const char* recognised_by;  // help: how a config in it is told
  const char* help;           // help: what it covers and where to read it
  // file: whether a file is written in it (the file rows are asked in table
  // order; rpsim's own, last, says yes to any). inside: whether the config
  // holds its names.
  bool (*recognise)(const nlohmann::json& config);
  // t.config holds the config as written (a file row: the whole file; an
  // inside row: rpsim's, its names still in it); on return it is in rpsim's
  // vocabulary, with t.notes and t.ignored. Unknown keys go to `report`; a
  // bad value throws ConfigError naming the key as the config wrote it.
  void (*translate)(Translation& t, KeyReport& report);
  // The same fields under its names and rpsim's: the unknown-key hints. An
  // inside row's are renames of whole keys (grad_scaler -> loss_scaler).
  std::vector<FieldName> (*field_names)();
  // inside: the top-level keys it adds to rpsim's vocabulary.
  std::vector<std::string> (*extension_keys)();
  std::span<const char* const> ignored;    // top-level sections read and listed as ignored
  std::span<const RefusedFields> refused;  // unsimulated fields: ignored, or refused off their neutral value
};

// The table: the framework rows, then any added (AddedVocabulary), then
// rpsim's own (the file vocabulary of a config no other row recognises).
std::span<const FrameworkVocabulary> framework_vocabularies();
// The row named `name`; std::logic_error if none (names come from the table).
const FrameworkVocabulary& framework_vocabulary(const std::string& name);
// The file vocabulary `config` is written in: the first file row that recognises it.
const FrameworkVocabulary& recognise_vocabulary(const nlohmann::json& config);

// A row added to the table while this object lives, ahead of rpsim's own: a
// new vocabulary without editing the table (a test). Not thread-safe: add
// rows before reading configs.
class AddedVocabulary {
 public:
  explicit AddedVocabulary(const FrameworkVocabulary& row);
  ~AddedVocabulary();
  AddedVocabulary(const AddedVocabulary&) = delete;
  AddedVocabulary& operator=(const AddedVocabulary&) = delete;

 private:
  std::string name_;
};

// A DeepSpeed config has at least one key only DeepSpeed has (train_batch_size,
// fp16, bf16, zero_optimization, ...); rpsim keys beside them do not change that.
bool looks_like_deepspeed(const nlohmann::json& j);

// Translates `j`, written in the file vocabulary named `vocabulary`, into
// rpsim's. Unknown keys and conflicts go to `report`, all of them; a bad
// value throws ConfigError naming the key as the file wrote it.
Translation translate_framework_config(const nlohmann::json& j, const std::string& vocabulary,
                                       KeyReport& report);

// The translations inside rpsim's own vocabulary (the inside rows: Keras
// policy names, grad_scaler, fp8_recipe), applied to `t.config`.
void translate_framework_names(Translation& t, KeyReport& report);
// The framework keys rpsim's vocabulary accepts beside its own.
std::vector<std::string> framework_extension_keys();

// Each field of `fields` that object `block` holds: listed in `t.ignored` as
// PATH.NAME, or ConfigError naming it when it is not its neutral value. A
// field given as an object counts by its "enabled" (DeepSpeed's "amp": {...}).
void ignore_unsimulated(const nlohmann::json& block, const std::string& path,
                        std::span<const UnsimulatedField> fields, Translation& t);

// For a key the config's `vocabulary` does not have but another one does:
// "...; this config (DeepSpeed) calls it train_batch_size". Empty otherwise.
std::string vocabulary_hint(const std::string& path, const std::string& vocabulary);

// The rows for `rpsim train --help`: each vocabulary, how it is recognised,
// what it refuses and ignores.
std::string framework_vocabularies_help();

}  // namespace rpsim::sim::config
