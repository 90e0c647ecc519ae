// copy_tiled (tiled_copy.hpp): the register transposes of tiled_copy.cpp give
// the bits of the element-by-element conversion at every size around their
// 8x8 and 4x4 blocks, at padded strides, in both directions, for binary64 ->
// binary32 (round to nearest even, NaN, infinities, subnormals, overflow),
// binary32 -> binary64 and binary64 -> binary64.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "rpsim/accumulation/tiled_copy.hpp"

namespace {

template <class T>
auto bits_of(T x) {
  using U = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  U u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Random bit patterns (every class of value) and, one in four, values near
// binary32's rounding points, range and subnormals.
template <class T>
std::vector<T> values(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (auto& x : v) {
    const std::uint64_t r = rng();
    if (r % 4 == 0) {
      const double scale = std::ldexp(1.0, int(r >> 8) % 300 - 150);
      x = T((1.0 + double(r >> 40) * 0x1p-24) * scale * ((r >> 2) % 2 ? -1 : 1));
    } else if constexpr (sizeof(T) == 8) {
      std::memcpy(&x, &r, sizeof x);
    } else {
      const auto h = std::uint32_t(r);
      std::memcpy(&x, &h, sizeof x);
    }
  }
  return v;
}

template <class From, class To>
void check_all_sizes() {
  std::mt19937_64 rng(7);
  for (Eigen::Index rows = 1; rows <= 19; ++rows)
    for (Eigen::Index cols = 1; cols <= 19; ++cols)
      for (const bool to_row_major : {true, false}) {
        // Source column-major with a padded column stride, the destination
        // row-major with a padded row stride (to_row_major), or the reverse.
        const Eigen::Index sld = (to_row_major ? rows : cols) + 3, dld = (to_row_major ? cols : rows) + 5;
        const std::vector<From> src = values<From>(std::size_t(sld * (to_row_major ? cols : rows)), rng);
        std::vector<To> got(std::size_t(dld * (to_row_major ? rows : cols)), To(-7)), want = got;
        const Eigen::Index srs = to_row_major ? 1 : sld, scs = to_row_major ? sld : 1;
        const Eigen::Index drs = to_row_major ? dld : 1, dcs = to_row_major ? 1 : dld;
        rpsim::sim::copy_tiled(src.data(), srs, scs, got.data(), drs, dcs, rows, cols);
        for (Eigen::Index i = 0; i < rows; ++i)
          for (Eigen::Index j = 0; j < cols; ++j)
            want[std::size_t(i * drs + j * dcs)] = To(src[std::size_t(i * srs + j * scs)]);
        std::size_t differ = 0;
        for (std::size_t k = 0; k < got.size(); ++k) differ += bits_of(got[k]) != bits_of(want[k]);
        INFO(rows << "x" << cols << (to_row_major ? " to row-major" : " to column-major"));
        CHECK(differ == 0);
      }
}

}  // namespace

TEST_CASE("accumulation: copy_tiled's register transposes equal the element-by-element conversion",
          "[tiled_copy]") {
  SECTION("binary64 to binary32") {
    check_all_sizes<double, float>();
  }
  SECTION("binary32 to binary64") {
    check_all_sizes<float, double>();
  }
  SECTION("binary64 to binary64") {
    check_all_sizes<double, double>();
  }
}

TEST_CASE("accumulation: copy_tiled's transposes at a GEMM op's shape, padding untouched", "[tiled_copy]") {
  std::mt19937_64 rng(11);
  const Eigen::Index rows = 256, cols = 257;  // two row tiles of the kernel, an edge column
  const std::vector<double> src = values<double>(std::size_t(rows * cols), rng);
  std::vector<float> dst(std::size_t(rows * (cols + 1)), 5.0f);
  rpsim::sim::copy_tiled(src.data(), 1, rows, dst.data(), cols + 1, 1, rows, cols);
  std::size_t differ = 0, padding = 0;
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < cols; ++j)
      differ +=
          bits_of(dst[std::size_t(i * (cols + 1) + j)]) != bits_of(float(src[std::size_t(j * rows + i)]));
    padding += dst[std::size_t(i * (cols + 1) + cols)] != 5.0f;
  }
  CHECK(differ == 0);
  CHECK(padding == 0);
}
