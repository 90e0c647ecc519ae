// The tensor a recipe quantises (recipe_internal.hpp): x itself, or x^T
// (TE's columnwise usage) and TE's 16-point random Hadamard transform of its
// rows; tile amaxes.
#include <fmt/format.h>

#include <array>
#include <bit>
#include <stdexcept>

#include "recipe_internal.hpp"

namespace rpsim {

namespace {

// get_wgrad_sign_vector() in reference_nvfp4.py (TE d0067d0, also aad3512).
constexpr std::array<int, 16> kTeSigns{1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

}  // namespace

std::span<const int> te_wgrad_sign_vector() {
  return kTeSigns;
}

std::vector<float> te_hadamard_rows(std::span<const float> x, std::size_t rows, std::size_t cols,
                                    std::span<const int> signs) {
  constexpr std::size_t n = 16;
  if (cols % n != 0)
    throw std::invalid_argument(
        fmt::format("Hadamard transform: rows of {} entries (must be a multiple of {})", cols, n));
  if (signs.size() != n)
    throw std::invalid_argument(fmt::format("Hadamard transform: {} signs (16)", signs.size()));
  if (x.size() != rows * cols)
    throw std::invalid_argument(fmt::format("Hadamard transform: {} values for {}x{}", x.size(), rows, cols));
  // The reference's x_mat @ (H / 4), H = diag(signs) Sylvester H16:
  // out_j = sum_k x_k s_k (-1)^popcount(k & j) / 4, every term exact (a
  // power-of-two multiple), summed in index order.
  std::vector<float> out(x.size());
  for (std::size_t g = 0; g < x.size(); g += n)
    for (std::size_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (std::size_t k = 0; k < n; ++k) {
        const int h = signs[k] * ((std::popcount(unsigned(k & j)) & 1) ? -1 : 1);
        sum = recipe::add_f32(sum, recipe::mul_f32(x[g + k], h > 0 ? 0.25f : -0.25f));
      }
      out[g + j] = sum;
    }
  return out;
}

namespace detail {

float tile_amax(const Tensor& t, const Tile& tile) {
  float amax = 0.0f;
  tile.each(t, [&](std::size_t, float v) { amax = recipe::nan_max(amax, recipe::abs_f32(v)); });
  return amax;
}

Tensor quantised_tensor(const QuantSpec& spec, std::span<const float> x, std::size_t rows, std::size_t cols) {
  Tensor t;
  if (!spec.columnwise) {
    t.v.assign(x.begin(), x.end());
    t.rows = rows;
    t.cols = cols;
    return t;
  }
  t.rows = cols;
  t.cols = rows;
  t.v.resize(x.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t.v[c * rows + r] = x[r * cols + c];
  if (spec.rht) t.v = te_hadamard_rows(t.v, t.rows, t.cols, te_wgrad_sign_vector());
  return t;
}

}  // namespace detail

}  // namespace rpsim
