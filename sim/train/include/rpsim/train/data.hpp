// Training data, one row per data set (data_sets()): Fashion-MNIST from its
// IDX files (Debian's dataset-fashion-mnist installs them gzipped under
// /usr/share/datasets/fashion-mnist) and text for language models (Debian's
// fortunes, text.hpp), each with a deterministic synthetic stand-in of the
// same shape when the files are absent (reported loudly).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {

// A data file that cannot be read or is not what it should be (a missing,
// truncated or corrupt IDX file): bad input, named in the message, so the CLI
// exits 2 and Python raises ValueError (not an internal error).
class DataFileError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A training or test set: images with one label each, or text cut into
// windows of `context` tokens whose targets are the next tokens.
struct Dataset {
  std::vector<std::uint8_t> pixels;                         // images: samples * features, row by row
  std::vector<int> labels;                                  // images: one per sample
  int channels = 1, height = 28, width = 28, classes = 10;  // text: classes = vocabulary size
  // Text: sample i is tokens[i * context .. (i + 1) * context], inputs the
  // first `context`, targets the last `context` (the next token of each).
  std::vector<int> tokens;
  int context = 0;  // > 0: a text set
  std::size_t windows = 0;
  bool text() const { return context > 0; }
  std::size_t size() const { return text() ? windows : labels.size(); }
  // Features per input row: pixels of an image, tokens of a window.
  int features() const { return text() ? context : channels * height * width; }
  // Rows `indices`. Images: scaled to [0, 1] and standardised with the
  // Fashion-MNIST training mean 0.2860 and standard deviation 0.3530
  // (binary64 values). Text: the token ids of each window (exact integers).
  Matrix batch(const std::vector<std::size_t>& indices) const;
  // The labels of the rows of the model's output for `indices`: one per
  // image, `context` per text window (row r * context + t: token t + 1).
  std::vector<int> targets(const std::vector<std::size_t>& indices) const;
};

// Where Debian's dataset-fashion-mnist installs the IDX files.
inline constexpr const char* kDebianFashionMnist = "/usr/share/datasets/fashion-mnist";

struct DataConfig {
  std::string name = "fashion-mnist";  // a row of data_sets()
  // Empty: the data set's default folder (Fashion-MNIST: Debian's; when it
  // lacks the files a synthetic set stands in, loudly). Any other folder must
  // hold them (a config error otherwise).
  std::string path;
  std::size_t train_limit = 0;  // samples (text: windows); 0: all
  std::size_t test_limit = 0;
  std::size_t synthetic_train_size = 6000;
  std::size_t synthetic_test_size = 1000;
  int context = 64;  // text: tokens per window (the model's block_size)
};

struct DataSplit {
  Dataset train, test;
  bool synthetic = false;
  std::string description;  // files read, or why the synthetic set was used
  std::string vocabulary;   // text: the byte of each token id
};

// What a run of a data set will find, known before it starts: sizes and
// where the samples come from. A set whose shape is the data's own (text:
// the vocabulary) is read to know it, and `loaded` holds what was read, so
// the run reads it no second time.
struct DataFacts {
  std::size_t train_samples = 0, test_samples = 0;
  bool synthetic = false;
  std::string source;  // "Fashion-MNIST IDX files in DIR", or why synthetic
  std::shared_ptr<const DataSplit> loaded;
};

// The data-set table: one row per name a config can give.
struct DataSetInfo {
  const char* name;
  const char* default_path;  // "" when it reads no files
  const char* help;
  DataSplit (*load)(const DataConfig& config, const std::string& path);
  // The facts without reading the samples; null: read them (load) to know.
  DataFacts (*facts)(const DataConfig& config, const std::string& path) = nullptr;
  // The files a folder given as data.path must hold: those it lacks (all of
  // them: the folder is wrong). Null: nothing checked before the run.
  std::vector<std::string> (*missing_files)(const std::string& dir) = nullptr;
};
std::span<const DataSetInfo> data_sets();
std::string data_set_names();  // comma-separated, for error messages

DataSplit load_data(const DataConfig& config);
// The row's facts for `config` (its folder: data.path or the row's default).
DataFacts data_facts(const DataConfig& config);
const DataSetInfo* find_data_set(const std::string& name);

// The Fashion-MNIST IDX files (each plain or .gz) that folder `dir` lacks:
// empty when it holds all four.
std::vector<std::string> missing_fashion_mnist_files(const std::string& dir);

// Reads one IDX file (gzipped when the name ends in .gz, via `gzip -dc`).
// Throws DataFileError naming the file when it cannot be read or is not a
// whole unsigned-byte IDX file.
std::vector<std::uint8_t> read_idx(const std::string& path, std::vector<std::uint32_t>& dims);

// The sample order of `epoch`: a Fisher-Yates shuffle driven by
// counter_random(seed, epoch, i), identical on every machine.
std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch);

}  // namespace rpsim::sim::train
