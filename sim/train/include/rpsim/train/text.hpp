// Text for a character-level language model. The corpus is Debian's
// `fortunes` package (/usr/share/games/fortunes: about 2.5 MB of English
// fortune cookies in plain ASCII, one file per topic, entries separated by
// lines holding "%"); without it, deterministic generated sentences stand in
// and the run says so loudly.
#pragma once

#include <string>
#include <vector>

#include "rpsim/train/data.hpp"

namespace rpsim::sim::train {

// The entries of every fortune file under `dir` (files without a '.' in
// their name: the .dat indexes and .u8 links are skipped), files in name
// order, entries in file order. Empty when the folder has none.
std::vector<std::string> read_fortunes(const std::string& dir);

// Text split and tokenised: tokens are the distinct bytes of the whole text
// in increasing order; every tenth entry (k % 10 == 9) is validation text,
// so both splits cover every topic. Entries are joined by a newline. Windows
// of config.context + 1 tokens, each starting where the previous ended,
// are the samples; train_limit and test_limit cap their number.
DataSplit split_text(const std::vector<std::string>& entries, const DataConfig& config);

// The rows of the data-set table.
DataSplit load_fortunes(const DataConfig& config, const std::string& path);
DataSplit synthetic_text(const DataConfig& config, const std::string& path);

// Deterministic sentences (subject, verb, object from small word lists,
// driven by counter_random): `count` entries.
std::vector<std::string> generated_sentences(std::size_t count);

}  // namespace rpsim::sim::train
