// The GEMM epilogue (gemm_epilogue.hpp): dequantisation, bias, output rounding.
#include "rpsim/accumulation/gemm_epilogue.hpp"

#include "rpsim/formats/array.hpp"

namespace rpsim::sim {
namespace {

void nearest_even(const Format& fmt, Matrix& m) {
  if (fmt == formats::binary64()) return;  // holds every entry
  ArrayOptions options;
  round_values(fmt, std::span<const double>(m.data(), std::size_t(m.size())),
               std::span<double>(m.data(), std::size_t(m.size())), options);
}

}  // namespace

double dequantisation_factor(double scale_a, double scale_b) {
  return double(float(1.0 / (scale_a * scale_b)));
}

double nvfp4_alpha(double amax_a, double amax_b, double e4m3_max_a, double e4m3_max_b) {
  const float factor = float(6.0 * 6.0 * e4m3_max_a * e4m3_max_b);
  return double(float(float(amax_a) * float(amax_b)) / factor);
}

void apply_epilogue(const GemmEpilogue& e, const Format& accumulation, Matrix& acc, Matrix* before_output) {
  const GemmEpilogue::Round round = e.round ? e.round : &nearest_even;
  if (e.alpha != 1.0) {
    acc *= e.alpha;
    round(accumulation, acc);
  }
  if (e.bias) {
    Matrix b = *e.bias;
    if (e.bias_format) round(*e.bias_format, b);
    acc.rowwise() += b.row(0);
  }
  round(accumulation, acc);
  if (before_output) *before_output = acc;
  if (e.output) round(*e.output, acc);
}

}  // namespace rpsim::sim
