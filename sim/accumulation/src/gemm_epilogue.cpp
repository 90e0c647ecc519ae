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

void apply_epilogue(const GemmEpilogue& e, const Format& accumulation, Matrix& acc, Matrix* before_output) {
  const GemmEpilogue::Round round = e.round ? e.round : &nearest_even;
  const double inv = dequantisation_factor(e.scale_a, e.scale_b);
  if (inv != 1.0) {
    acc *= inv;
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
