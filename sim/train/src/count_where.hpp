// Counting the entries where a comparison holds, two at a time in a GCC
// vector type (SSE2, the x86-64 baseline). Eigen's boolean expressions and
// the scalar loops counted one entry at a time and did not vectorise (2-4%
// of the MLP step each); wider vector types were split into scalar compares.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <cstring>

namespace rpsim::sim::train::detail {

typedef double PairOfDoubles __attribute__((vector_size(16)));

inline PairOfDoubles load_pair(const double* p) {
  PairOfDoubles v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The number of i < size with pred(arrays[i]...). `pred` is called on pairs
// and on single doubles alike (a generic lambda), with the scalar
// comparisons' meaning: NaN != 0 is true, NaN == NaN false, and x - x == 0
// is std::isfinite(x).
template <class Pred, class... Arrays>
std::int64_t count_where(Eigen::Index size, Pred pred, const Arrays*... arrays) {
  using Counts = decltype(pred(load_pair(arrays)...));  // two 64-bit lanes, -1 where true
  Counts lanes = {0, 0};
  Eigen::Index i = 0;
  for (; i + 2 <= size; i += 2) lanes -= pred(load_pair(arrays + i)...);  // -1 where true
  std::int64_t n = lanes[0] + lanes[1];
  for (; i < size; ++i) n += bool(pred(arrays[i]...));
  return n;
}

}  // namespace rpsim::sim::train::detail
