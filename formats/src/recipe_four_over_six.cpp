// NVFP4 4over6 (TE reference_nvfp4.py _quantize_blockwise_4over6_reference):
// each block is quantised twice, map-to-6 (E4M3 scale of vec_max / 6) and
// map-to-4 (1.5 times it), and keeps the one whose error, summed over the
// block's 16 entries in index order (16x16 tiles: each row's sum, the rows
// added in the kernel's warp-reduction tree), is smaller; ties keep map-to-6.
#include <array>

#include "recipe_internal.hpp"

namespace rpsim::detail {

namespace {

using namespace recipe;

struct Candidate {
  std::uint8_t scale;
  float enc;
  std::array<float, 16> row_error{};  // one per row of the tile (1 for 1x16 blocks)
};

Candidate candidate(float vec_max, const Nvfp4TensorScale& ts, bool map4) {
  Candidate c;
  c.scale = nvfp4_4over6_scale(vec_max, ts.encode, map4);
  c.enc = nvfp4_encode_scale(element_value(ElementKind::e4m3, c.scale), ts.decode);
  return c;
}

// The 16 row errors added as the CUDA warp reduction adds them:
// (r_i + r_i+8), then (+4), (+2), (+1) (_sum_4over6_2d_error).
float tree_sum(std::array<float, 16> r) {
  for (std::size_t half = 8; half >= 1; half /= 2)
    for (std::size_t i = 0; i < half; ++i) r[i] = add_f32(r[i], r[i + half]);
  return r[0];
}

}  // namespace

void four_over_six_tile(const Tensor& t, const Tile& tile, const QuantSpec& spec, const Nvfp4TensorScale& ts,
                        float amax, Quantized& q) {
  const float vec_max = tile_amax(t, tile);
  Candidate c6 = candidate(vec_max, ts, false), c4 = candidate(vec_max, ts, true);
  const bool mse = spec.four_over_six == FourOverSix::mse;
  const float e4m3_max = float(spec.e4m3_max);
  // Every entry of the zero-padded tile, as the reference's padded tensor has.
  for (std::size_t dr = 0; dr < tile.height; ++dr)
    for (std::size_t dc = 0; dc < tile.width; ++dc) {
      const float x = tile.at(t, tile.r0 + dr, tile.c0 + dc);
      for (Candidate* c : {&c6, &c4}) {
        const float v = element_value(ElementKind::e2m1, nvfp4_element(x, c->enc));
        const float term = nvfp4_4over6_term(v, c->scale, amax, e4m3_max, x, ts.encode, spec.fast_math, mse);
        c->row_error[dr] = add_f32(c->row_error[dr], term);
      }
    }
  const bool tiles = tile.height > 1;
  const float e6 = tiles ? tree_sum(c6.row_error) : c6.row_error[0];
  const float e4 = tiles ? tree_sum(c4.row_error) : c4.row_error[0];
  const Candidate& pick = e4 < e6 ? c4 : c6;  // a NaN error keeps map-to-6
  q.scale_codes.push_back(pick.scale);
  q.scales.push_back(element_value(ElementKind::e4m3, pick.scale));
  tile.each(t, [&](std::size_t i, float x) { q.codes[i] = nvfp4_element(x, pick.enc); });
}

}  // namespace rpsim::detail
