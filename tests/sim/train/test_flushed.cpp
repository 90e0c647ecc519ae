// flushed_mask and count_flushed (flushed.cpp): the entry-by-entry
// comparison, and nothing flushed inside ScopedNothingFlushed.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "rpsim/train/tensor.hpp"

using namespace rpsim::sim::train;

TEST_CASE("train: inside ScopedNothingFlushed masks are all false and counts zero, outside they count",
          "[train]") {
  Matrix before(2, 3), after(2, 3);
  before << 1e-9, 2.0, 0.0, -1e-9, 3.0, 5.0;
  after << 0.0, 2.0, 0.0, 0.0, 3.0, 5.0;  // two entries flushed
  CHECK(count_flushed(before, after) == 2);
  CHECK(flushed_mask(before, after).count() == 2);
  {
    const ScopedNothingFlushed binary64;
    const Mask m = flushed_mask(before, after);
    CHECK(m.rows() == 2);
    CHECK(m.cols() == 3);
    CHECK(m.count() == 0);
    CHECK(count_flushed(before, after) == 0);
    CHECK_THROWS_AS(flushed_mask(before, Matrix(3, 2)), std::invalid_argument);
  }
  CHECK(count_flushed(before, after) == 2);
}

TEST_CASE(
    "train: count_flushed and flushed_mask are the entry-by-entry comparison, NaN and infinities included",
    "[train]") {
  // Sizes 3, 6, 21 and 192 leave count_where's two-entry and flushed_mask's
  // four-entry vector loops tails; the values meet in every pair.
  for (const Eigen::Index rows : {1, 2, 7, 64}) {
    Matrix before(rows, 3), after(rows, 3);
    const double values[] = {0.0, -0.0, 1e-30, -2.0, INFINITY, -INFINITY, NAN};
    for (Eigen::Index i = 0; i < before.size(); ++i) {
      before.data()[i] = values[std::size_t(i) % 7];
      after.data()[i] = values[std::size_t(i / 7 + 3 * i + 2) % 7];  // every pair within 49 entries
    }
    std::int64_t expected = 0;
    for (Eigen::Index i = 0; i < before.size(); ++i)
      expected += before.data()[i] != 0.0 && after.data()[i] == 0.0;
    INFO(rows << " rows");
    CHECK(expected > 0);
    CHECK(count_flushed(before, after) == expected);
    const Mask mask = flushed_mask(before, after);
    CHECK(mask.count() == expected);
    std::int64_t differ = 0;  // entry by entry, the vector loop's 4-entry tail included
    for (Eigen::Index i = 0; i < before.size(); ++i)
      differ += mask.data()[i] != (before.data()[i] != 0.0 && after.data()[i] == 0.0);
    CHECK(differ == 0);
  }
}
