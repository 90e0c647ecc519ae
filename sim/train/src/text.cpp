// Text corpora for the language model: Debian's fortunes, or generated
// sentences.
#include "rpsim/train/text.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rpsim/formats/random.hpp"

namespace rpsim::sim::train {
namespace {

// One split: the entries joined, tokenised, cut into windows.
Dataset text_split(const std::string& text, const std::array<int, 256>& id, int vocabulary,
                   const DataConfig& c, std::size_t limit) {
  Dataset d;
  d.context = c.context;
  d.classes = vocabulary;
  d.channels = d.height = d.width = 0;
  d.tokens.reserve(text.size());
  for (const unsigned char ch : text) d.tokens.push_back(id[ch]);
  d.windows = d.tokens.size() > 1 ? (d.tokens.size() - 1) / std::size_t(c.context) : 0;
  if (limit && limit < d.windows) d.windows = limit;
  d.tokens.resize(std::min(d.tokens.size(), d.windows * std::size_t(c.context) + 1));
  return d;
}

}  // namespace

std::vector<std::string> read_fortunes(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().filename().string().find('.') == std::string::npos)
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> entries;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string line, entry;
    while (std::getline(in, line)) {
      if (line == "%") {
        if (!entry.empty()) entries.push_back(std::move(entry));
        entry.clear();
      } else {
        entry += line + "\n";
      }
    }
    if (!entry.empty()) entries.push_back(std::move(entry));
  }
  return entries;
}

DataSplit split_text(const std::vector<std::string>& entries, const DataConfig& config) {
  std::string train, test;
  for (std::size_t k = 0; k < entries.size(); ++k) (k % 10 == 9 ? test : train) += entries[k] + "\n";
  std::array<bool, 256> seen{};
  for (const std::string* t : {&train, &test})
    for (const unsigned char ch : *t) seen[ch] = true;
  std::array<int, 256> id{};
  DataSplit s;
  for (int b = 0; b < 256; ++b)
    if (seen[std::size_t(b)]) {
      id[std::size_t(b)] = int(s.vocabulary.size());
      s.vocabulary += char(b);
    }
  const int v = int(s.vocabulary.size());
  s.train = text_split(train, id, v, config, config.train_limit);
  s.test = text_split(test, id, v, config, config.test_limit);
  return s;
}

DataSplit load_fortunes(const DataConfig& config, const std::string& path) {
  const std::vector<std::string> entries = read_fortunes(path);
  if (!entries.empty()) {
    DataSplit s = split_text(entries, config);
    std::ostringstream d;
    d << "fortunes from " << path << " (Debian's fortunes): " << entries.size() << " entries, "
      << s.train.tokens.size() + s.test.tokens.size() << " bytes used, " << s.vocabulary.size()
      << "-token byte vocabulary";
    s.description = d.str();
    return s;
  }
  DataSplit s = synthetic_text(config, "");
  s.description = "SYNTHETIC text: no fortune files under '" + path +
                  "' (install Debian's fortunes); results are NOT results on real text";
  return s;
}

std::vector<std::string> generated_sentences(std::size_t count) {
  static const char* subjects[] = {"the cat",     "a dog",       "my friend", "the old man",   "a small bird",
                                   "the teacher", "every child", "the river", "our neighbour", "a stranger"};
  static const char* verbs[] = {"sees",  "likes",   "follows", "remembers",
                                "finds", "carries", "watches", "paints"};
  static const char* objects[] = {"the moon",        "a red apple", "the long road",     "an open door",
                                  "the quiet house", "a letter",    "the morning light", "two boats",
                                  "the garden",      "a song"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t r = counter_random(0x7E57, 1, i);
    std::string s = std::string(subjects[r % 10]) + " " + verbs[(r >> 8) % 8] + " " + objects[(r >> 16) % 10];
    if ((r >> 24) % 3 == 0) s += " and " + std::string(verbs[(r >> 32) % 8]) + " " + objects[(r >> 40) % 10];
    s[0] = char(s[0] - 'a' + 'A');
    out.push_back(s + ".\n");
  }
  return out;
}

DataSplit synthetic_text(const DataConfig& config, const std::string&) {
  DataSplit s = split_text(generated_sentences(20000), config);
  s.synthetic = true;
  s.description = "SYNTHETIC text (requested): 20000 generated sentences from fixed word lists";
  return s;
}

}  // namespace rpsim::sim::train
