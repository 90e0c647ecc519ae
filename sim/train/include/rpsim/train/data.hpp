// Training data: Fashion-MNIST from its IDX files (Debian's
// dataset-fashion-mnist installs them gzipped under
// /usr/share/datasets/fashion-mnist), or a deterministic synthetic stand-in
// of the same shape when the files are absent (reported loudly).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {

struct Dataset {
  std::vector<std::uint8_t> pixels;  // samples * features, row by row
  std::vector<int> labels;
  int channels = 1, height = 28, width = 28, classes = 10;
  std::size_t size() const { return labels.size(); }
  int features() const { return channels * height * width; }
  // Rows `indices`, scaled to [0, 1] and standardised with the Fashion-MNIST
  // training mean 0.2860 and standard deviation 0.3530 (binary64 values).
  Matrix batch(const std::vector<std::size_t>& indices) const;
};

struct DataConfig {
  std::string name = "fashion-mnist";  // or "synthetic"
  std::string path = "/usr/share/datasets/fashion-mnist";
  std::size_t train_limit = 0;  // 0: all
  std::size_t test_limit = 0;
  std::size_t synthetic_train_size = 6000;
  std::size_t synthetic_test_size = 1000;
};

struct DataSplit {
  Dataset train, test;
  bool synthetic = false;
  std::string description;  // files read, or why the synthetic set was used
};

DataSplit load_data(const DataConfig& config);

// Reads one IDX file (gzipped when the name ends in .gz, via `gzip -dc`).
// Throws std::runtime_error naming the file on a bad header.
std::vector<std::uint8_t> read_idx(const std::string& path, std::vector<std::uint32_t>& dims);

// The sample order of `epoch`: a Fisher-Yates shuffle driven by
// counter_random(seed, epoch, i), identical on every machine.
std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch);

}  // namespace rpsim::sim::train
