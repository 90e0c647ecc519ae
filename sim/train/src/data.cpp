// Fashion-MNIST IDX reader and the synthetic fallback.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "rpsim/formats/random.hpp"
#include "rpsim/train/data.hpp"
#include "rpsim/train/text.hpp"

namespace rpsim::sim::train {

Matrix Dataset::batch(const std::vector<std::size_t>& indices) const {
  const int n = features();
  if (text()) {
    Matrix x(Eigen::Index(indices.size()), n);
    for (std::size_t r = 0; r < indices.size(); ++r)
      for (int t = 0; t < n; ++t)
        x(Eigen::Index(r), t) = tokens[indices[r] * std::size_t(n) + std::size_t(t)];
    return x;
  }
  Matrix x(Eigen::Index(indices.size()), n);
  for (std::size_t r = 0; r < indices.size(); ++r) {
    const std::uint8_t* p = pixels.data() + indices[r] * std::size_t(n);
    for (int j = 0; j < n; ++j) x(Eigen::Index(r), j) = (double(p[j]) / 255.0 - 0.2860) / 0.3530;
  }
  return x;
}

std::vector<int> Dataset::targets(const std::vector<std::size_t>& indices) const {
  std::vector<int> out;
  if (!text()) {
    for (std::size_t i : indices) out.push_back(labels[i]);
    return out;
  }
  for (std::size_t i : indices)
    for (int t = 1; t <= context; ++t) out.push_back(tokens[i * std::size_t(context) + std::size_t(t)]);
  return out;
}

std::vector<std::uint8_t> read_idx(const std::string& path, std::vector<std::uint32_t>& dims) {
  std::vector<std::uint8_t> bytes;
  const bool gz = path.size() > 3 && path.substr(path.size() - 3) == ".gz";
  if (gz) {
    // Debian ships the files gzipped; gzip is part of every Debian system.
    const std::string cmd = "gzip -dc '" + path + "'";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) throw DataFileError("cannot run gzip on '" + path + "'");
    std::vector<std::uint8_t> buf(1 << 16);
    for (;;) {
      const std::size_t n = fread(buf.data(), 1, buf.size(), pipe);
      bytes.insert(bytes.end(), buf.begin(), buf.begin() + long(n));
      if (n > 0) continue;
      // A signal whose handler does not restart reads (Python's SIGINT
      // handler, for one) ends fread with EINTR mid-file: read on.
      if (ferror(pipe) && errno == EINTR) {
        clearerr(pipe);
        continue;
      }
      break;
    }
    const bool read_error = ferror(pipe) != 0;
    if (pclose(pipe) != 0 || read_error)
      throw DataFileError("'" + path + "': gzip -dc failed (a corrupt or truncated gzip file)");
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataFileError("cannot open '" + path + "'");
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08)
    throw DataFileError("'" + path + "': not an unsigned-byte IDX file");
  const int rank = bytes[3];
  if (bytes.size() < std::size_t(4 + 4 * rank)) throw DataFileError("'" + path + "': truncated header");
  dims.clear();
  std::size_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const std::uint8_t* p = bytes.data() + 4 + 4 * d;
    dims.push_back(std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3]);
    count *= dims.back();
  }
  const std::size_t offset = std::size_t(4 + 4 * rank);
  if (bytes.size() != offset + count)
    throw DataFileError("'" + path + "': expected " + std::to_string(count) + " data bytes, found " +
                        std::to_string(bytes.size() - offset));
  return {bytes.begin() + long(offset), bytes.end()};
}

namespace {

std::string find_file(const std::string& dir, const std::string& stem) {
  for (const std::string& name : {stem, stem + ".gz"}) {
    const auto p = std::filesystem::path(dir) / name;
    if (std::filesystem::exists(p)) return p.string();
  }
  return "";
}

Dataset load_split(const std::string& images, const std::string& labels, std::size_t limit) {
  Dataset d;
  std::vector<std::uint32_t> idims, ldims;
  d.pixels = read_idx(images, idims);
  const auto lab = read_idx(labels, ldims);
  if (idims.size() != 3 || ldims.size() != 1 || idims[0] != ldims[0])
    throw DataFileError("'" + images + "' and '" + labels + "' do not describe the same samples");
  d.height = int(idims[1]);
  d.width = int(idims[2]);
  d.labels.assign(lab.begin(), lab.end());
  if (limit && limit < d.labels.size()) {
    d.labels.resize(limit);
    d.pixels.resize(limit * std::size_t(d.features()));
  }
  return d;
}

// Ten class prototypes (random smooth blobs) plus per-sample noise: a task
// an MLP learns to high accuracy within an epoch, same shape as the real one.
Dataset synthetic(std::size_t n, std::uint64_t stream) {
  Dataset d;
  const int f = d.features();
  constexpr std::uint64_t seed = 0x5EED'F00D;
  auto uniform = [](std::uint64_t bits) { return double(bits >> 11) * 0x1.0p-53; };
  std::vector<double> proto(std::size_t(10 * f));
  for (int c = 0; c < 10; ++c) {
    double cy[3], cx[3];
    for (int b = 0; b < 3; ++b) {
      cy[b] = 4 + 20 * uniform(counter_random(seed, 1, std::uint64_t(c * 8 + 2 * b)));
      cx[b] = 4 + 20 * uniform(counter_random(seed, 1, std::uint64_t(c * 8 + 2 * b + 1)));
    }
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        double v = 0;
        for (int b = 0; b < 3; ++b)
          v += std::exp(-((y - cy[b]) * (y - cy[b]) + (x - cx[b]) * (x - cx[b])) / 18.0);
        proto[std::size_t(c * f + y * 28 + x)] = std::min(1.0, v);
      }
  }
  d.labels.resize(n);
  d.pixels.resize(n * std::size_t(f));
  for (std::size_t i = 0; i < n; ++i) {
    const int c = int(counter_random(seed, stream, i) % 10);
    d.labels[i] = c;
    for (int j = 0; j < f; ++j) {
      const double noise =
          uniform(counter_random(seed, stream + 1000, i * std::size_t(f) + std::size_t(j))) - 0.5;
      const double v = std::clamp(proto[std::size_t(c * f + j)] + 0.6 * noise, 0.0, 1.0);
      d.pixels[i * std::size_t(f) + std::size_t(j)] = std::uint8_t(std::lround(v * 255));
    }
  }
  return d;
}

const char* const kIdxStems[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// The synthetic stand-in for Fashion-MNIST.
DataSplit synthetic_images(const DataConfig& config) {
  DataSplit s;
  s.synthetic = true;
  s.description = "SYNTHETIC data (requested): 10 classes of blob prototypes plus noise, 28x28";
  auto limited = [](std::size_t n, std::size_t limit) { return limit && limit < n ? limit : n; };
  s.train = synthetic(limited(config.synthetic_train_size, config.train_limit), 10);
  s.test = synthetic(limited(config.synthetic_test_size, config.test_limit), 20);
  return s;
}

DataSplit fashion_mnist(const DataConfig& config, const std::string& path) {
  DataSplit s;
  const std::string ti = find_file(path, kIdxStems[0]);
  const std::string tl = find_file(path, kIdxStems[1]);
  const std::string vi = find_file(path, kIdxStems[2]);
  const std::string vl = find_file(path, kIdxStems[3]);
  if (!ti.empty() && !tl.empty() && !vi.empty() && !vl.empty()) {
    s.train = load_split(ti, tl, config.train_limit);
    s.test = load_split(vi, vl, config.test_limit);
    s.description = "Fashion-MNIST from " + path;
    return s;
  }
  s = synthetic_images(config);
  s.description = "SYNTHETIC data: Fashion-MNIST IDX files not found under '" + path +
                  "' (install Debian's dataset-fashion-mnist); results are NOT Fashion-MNIST results";
  return s;
}

DataSplit synthetic_images(const DataConfig& config, const std::string&) {
  return synthetic_images(config);
}

std::size_t limited(std::size_t n, std::size_t limit) {
  return limit && limit < n ? limit : n;
}

DataFacts synthetic_images_facts(const DataConfig& config, const std::string&) {
  return {limited(config.synthetic_train_size, config.train_limit),
          limited(config.synthetic_test_size, config.test_limit), true,
          "SYNTHETIC (asked for): 10 classes of blobs plus noise, 28x28", nullptr};
}

// The IDX files' sample counts (Fashion-MNIST: 60000 training, 10000 test
// images), or the synthetic stand-in's when the folder lacks them.
DataFacts fashion_mnist_facts(const DataConfig& config, const std::string& path) {
  if (!missing_fashion_mnist_files(path).empty())
    return {
        limited(config.synthetic_train_size, config.train_limit),
        limited(config.synthetic_test_size, config.test_limit), true,
        "SYNTHETIC stand-in: no Fashion-MNIST files in " + path + " (install Debian's dataset-fashion-mnist)",
        nullptr};
  return {limited(60000, config.train_limit), limited(10000, config.test_limit), false,
          "Fashion-MNIST IDX files in " + path, nullptr};
}

const DataSetInfo kDataSets[] = {
    {"fashion-mnist", kDebianFashionMnist,
     "Fashion-MNIST, 28x28 grey images, 10 classes (Debian's dataset-fashion-mnist)", fashion_mnist,
     fashion_mnist_facts, missing_fashion_mnist_files},
    {"synthetic", "", "10 classes of blob prototypes plus noise, 28x28 (no files)", synthetic_images,
     synthetic_images_facts},
    {"fortunes", "/usr/share/games/fortunes",
     "English text for a character-level language model: Debian's fortunes (fortune cookies)", load_fortunes},
    {"synthetic-text", "",
     "deterministic generated sentences for a character-level language model (no files)", synthetic_text},
};

}  // namespace

std::vector<std::string> missing_fashion_mnist_files(const std::string& dir) {
  std::vector<std::string> missing;
  for (const char* stem : kIdxStems)
    if (find_file(dir, stem).empty()) missing.emplace_back(stem);
  return missing;
}

std::span<const DataSetInfo> data_sets() {
  return kDataSets;
}

std::string data_set_names() {
  std::string s;
  for (const auto& d : kDataSets) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

const DataSetInfo* find_data_set(const std::string& name) {
  for (const auto& d : kDataSets)
    if (name == d.name) return &d;
  return nullptr;
}

DataFacts data_facts(const DataConfig& config) {
  const DataSetInfo* d = find_data_set(config.name);
  if (d && d->facts) return d->facts(config, config.path.empty() ? d->default_path : config.path);
  auto data = std::make_shared<const DataSplit>(load_data(config));
  return {data->train.size(), data->test.size(), data->synthetic, data->description, data};
}

DataSplit load_data(const DataConfig& config) {
  if (const DataSetInfo* d = find_data_set(config.name))
    return d->load(config, config.path.empty() ? d->default_path : config.path);
  throw std::invalid_argument("data.name: unknown data set \"" + config.name + "\" (" + data_set_names() +
                              ")");
}

std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = std::size_t(counter_random(seed, 0x0DE7'0000 + epoch, i) % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

}  // namespace rpsim::sim::train
