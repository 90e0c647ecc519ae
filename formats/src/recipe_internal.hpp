// Internal to the recipe mechanism (recipe_*.cpp): the tensor a recipe
// quantises and its tiles.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "rpsim/formats/recipe.hpp"

namespace rpsim::detail {

// Row-major binary32 values.
struct Tensor {
  std::vector<float> v;
  std::size_t rows = 0, cols = 0;
};

// A tile of `height` x `width` entries from (r0, c0). The references pad the
// tensor with zeros to whole tiles; entries past its edge read as 0.
struct Tile {
  std::size_t r0, c0, height, width;
  float at(const Tensor& t, std::size_t r, std::size_t c) const {
    return r < t.rows && c < t.cols ? t.v[r * t.cols + c] : 0.0f;
  }
  // f(flat index, value) for each entry of the tile inside the tensor, row by row.
  template <class F>
  void each(const Tensor& t, F f) const {
    for (std::size_t r = r0; r < r0 + height && r < t.rows; ++r)
      for (std::size_t c = c0; c < c0 + width && c < t.cols; ++c) f(r * t.cols + c, t.v[r * t.cols + c]);
  }
};

// max |entry| of the tile, NaN if any entry is (torch.amax).
float tile_amax(const Tensor& t, const Tile& tile);

// x (rows x cols), or x^T and, with spec.rht, its Hadamard transform.
Tensor quantised_tensor(const QuantSpec& spec, std::span<const float> x, std::size_t rows, std::size_t cols);

// One NVFP4 tile under 4over6: both candidates, their errors, the pick.
// Appends the tile's scale to q and writes its codes.
void four_over_six_tile(const Tensor& t, const Tile& tile, const QuantSpec& spec,
                        const recipe::Nvfp4TensorScale& ts, float amax, Quantized& q);

}  // namespace rpsim::detail
