// recipe_block.hpp: a GEMM operand's groups as the trainer (and the CUDA
// backend) quantise them, against formats' recipe mechanism, quantize() --
// the one `rpsim recipe-check` holds to TE's and torchao's reference files.
// Under 1 x b blocks each row is quantize() of that row; under b x b tiles
// the operand is quantize() with b x b tiles; stochastically, group g is
// quantize() of its entries keyed (seed, mix64(stream ^ mix64(g))).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rpsim/formats/random.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/formats/recipe_block.hpp"

using namespace rpsim;
using recipe::ElementKind;

namespace {

std::vector<float> operand(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = counter_random(seed, 1, i);
    x[i] = std::ldexp(float(std::int64_t(r >> 40) - (1 << 23)) / float(1 << 23), int(r % 30) - 15);
    if (r % 97 == 0) x[i] = 0.0f;
  }
  return x;
}

struct Result {
  std::vector<std::uint8_t> codes;
  std::vector<float> decode;
};

Result group_blocks(const QuantSpec& spec, const recipe::OperandGroups& g, const std::vector<float>& x,
                    const recipe::Nvfp4TensorScale& ts, const recipe::StochasticElements* sr) {
  Result r{std::vector<std::uint8_t>(x.size()), std::vector<float>(x.size())};
  for (std::size_t gi = 0; gi < recipe::group_rows(g); ++gi)
    for (std::size_t gj = 0; gj < recipe::group_cols(g); ++gj)
      for (std::size_t j = 0; j < recipe::group_blocks(g); ++j)
        recipe::quantize_group_block(
            spec, g, gi, gj, j, ts, sr, [&](std::size_t i, std::size_t k) { return x[i * g.cols + k]; },
            [&](std::size_t i, std::size_t k, std::uint8_t code, const recipe::BlockScale& b) {
              r.codes[i * g.cols + k] = code;
              r.decode[i * g.cols + k] = b.decode;
            });
  return r;
}

std::vector<QuantSpec> specs() {
  std::vector<QuantSpec> out;
  for (auto rule : {recipe::MxScaleRule::floor, recipe::MxScaleRule::rceil, recipe::MxScaleRule::even})
    for (auto k : {ElementKind::e4m3, ElementKind::e2m1}) {
      QuantSpec s;
      s.element = k;
      s.scale_rule = rule;
      out.push_back(s);
    }
  QuantSpec fp8;
  fp8.family = ScaleFamily::fp8;
  fp8.pow2_scales = true;
  out.push_back(fp8);
  QuantSpec nv;
  nv.family = ScaleFamily::nvfp4;
  nv.element = ElementKind::e2m1;
  out.push_back(nv);
  return out;
}

}  // namespace

TEST_CASE("recipe block: an operand's rows and tiles quantise as quantize() quantises them, every family",
          "[recipe]") {
  const std::size_t rows = 20, cols = 50, block = 16;
  const std::vector<float> x = operand(rows * cols, 3);
  float amax = 0;
  for (float v : x) amax = recipe::nan_max(amax, recipe::abs_f32(v));
  const recipe::Nvfp4TensorScale ts = recipe::nvfp4_tensor_scale(amax, 448.0f);
  std::size_t compared = 0;
  for (QuantSpec spec : specs())
    for (bool tiles : {false, true}) {
      INFO("family " << int(spec.family) << " element " << int(spec.element) << " tiles " << tiles);
      const Result got = group_blocks(spec, {rows, cols, block, tiles}, x, ts, nullptr);
      spec.tile_rows = tiles ? int(block) : 1;
      spec.tile_cols = int(block);
      const Quantized q = quantize(spec, x, rows, cols, nullptr, std::span<const float>(&amax, 1));
      for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t tile = (i / cols) / (tiles ? block : 1) * q.scale_cols + (i % cols) / block;
        REQUIRE(got.codes[i] == q.codes[i]);
        REQUIRE(got.decode[i] == q.scales[tile]);
        ++compared;
      }
    }
  CHECK(compared == 2 * specs().size() * rows * cols);
}

TEST_CASE("recipe block: stochastic groups are quantize() of the group keyed by mix64(stream ^ mix64(g))",
          "[recipe]") {
  const std::size_t rows = 6, cols = 40, block = 16;
  const std::vector<float> x = operand(rows * cols, 5);
  const recipe::Nvfp4TensorScale ts{1.0f, 1.0f};
  QuantSpec spec;
  spec.element = ElementKind::e2m1;
  recipe::StochasticElements sr;
  sr.seed = 11;
  sr.stream = 42;
  sr.element = rpsim::format("e2m1");
  Rounding rounding;
  rounding.mode = RoundingMode::stochastic;
  sr.rounding = rounding_desc(rounding);
  const Result got = group_blocks(spec, {rows, cols, block, false}, x, ts, &sr);
  const Result nearest = group_blocks(spec, {rows, cols, block, false}, x, ts, nullptr);
  spec.tile_cols = int(block);
  std::size_t differ = 0;
  for (std::size_t g = 0; g < rows; ++g) {
    ElementRounding er;
    er.mode = RoundingMode::stochastic;
    er.seed = sr.seed;
    er.stream = mix64(sr.stream ^ mix64(g));
    const Quantized q = quantize(spec, std::span<const float>(x).subspan(g * cols, cols), 1, cols, &er);
    for (std::size_t k = 0; k < cols; ++k) {
      REQUIRE(got.codes[g * cols + k] == q.codes[k]);
      differ += got.codes[g * cols + k] != nearest.codes[g * cols + k];
    }
  }
  CHECK(differ > 0);  // (the draws did round some elements away from nearest)
}
