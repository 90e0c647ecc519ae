// The arithmetic of sim/accumulation/fit/cublas_h100_grid.py: an 8x8 block
// of D of a capture GEMM under a schedule, its inputs rebuilt from the
// capture's index hash. The fit runs it as a child process (one line in, one
// out) instead of importing the Python module (issue #38: the fit script in
// sim/ imported rpsim from experiments/, a dependency upward).
//
// Each input line: P SALT_A SALT_B SALT_C M N K ROW COL BIAS SPEC
//   P: the inputs' mantissa bits (23 tf32, 10 fp16, 7 bf16, 3 e4m3); the
//   salts as the capture's hash takes them; BIAS 1: C = bias[COL .. COL+8]
//   broadcast over the rows (salt SALT_C); SPEC: an accumulation model.
//   A kernel preset (cublas:h100:...) runs the schedule it gives for the
//   whole M x N x K, not for the 8 x K x 8 block. The rest of the line, when
//   there is one, is a JSON object {"cublas": {"heuristic": {...}, "kernels":
//   [...]}} as capture_gemms and the held-out capture record how cuBLAS ran
//   the GEMM: the block then runs the recorded schedule (gemm-check's
//   resolve_gemm_model), or the preset's where the record is not modelled.
// Each output line: the 64 values of the block as binary32 bit patterns,
// row-major, in decimal, and for a preset "# " and where its schedule came
// from (gemm-check's words: "recorded: ...", "guessed: ..."); or "error: why".
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/validation/gemm_manifest.hpp"

namespace {

// The capture's hash (grid.py hashed()): the value at flat index idx.
double hashed(std::int64_t idx, std::int64_t salt, int p) {
  constexpr std::int64_t mask = 0xFFFFFFFF, mul = 0x45D9F3B;
  std::int64_t h = (idx + salt) & mask;
  h = (((h >> 16) ^ h) * mul) & mask;
  h = (((h >> 16) ^ h) * mul) & mask;
  h = (h >> 16) ^ h;
  const std::int64_t mant = (h & ((std::int64_t(1) << p) - 1)) + (std::int64_t(1) << p);
  const int e = int((h >> p) % 5) - 3 - p;
  return std::ldexp(double((1 - 2 * int((h >> 31) & 1)) * mant), e);
}

std::string block(std::istringstream& in) {
  int p = 0, bias = 0;
  std::int64_t sa = 0, sb = 0, sc = 0;
  long m = 0, n = 0, k = 0, row = 0, col = 0;
  std::string spec;
  if (!(in >> p >> sa >> sb >> sc >> m >> n >> k >> row >> col >> bias >> spec) || k < 1 || p < 1 || p > 30)
    return "error: expected P SALT_A SALT_B SALT_C M N K ROW COL BIAS SPEC [RECORD]";
  std::string record;
  std::getline(in >> std::ws, record);
  using rpsim::sim::Matrix;
  rpsim::sim::AccumulationModel model = rpsim::sim::AccumulationModel::parse(spec);
  std::string source;
  if (std::holds_alternative<rpsim::sim::KernelPreset>(model.variant())) {
    rpsim::sim::ManifestGemm g;
    g.m = m, g.n = n, g.k = k;
    if (!record.empty()) rpsim::sim::read_cublas_record_text(record, "record", g);
    const auto resolved = rpsim::sim::resolve_gemm_model(g, spec);
    model = resolved.model;
    source = resolved.schedule;
  } else if (!record.empty()) {
    return "error: a record goes with a kernel preset (cublas:...), not " + spec;
  }
  Matrix a(8, k), b(k, 8), c = Matrix::Zero(8, 8);
  for (long r = 0; r < 8; ++r)
    for (long t = 0; t < k; ++t) a(r, t) = hashed((row + r) * k + t, sa, p);
  for (long t = 0; t < k; ++t)
    for (long q = 0; q < 8; ++q) b(t, q) = hashed(t * n + col + q, sb, p);
  if (bias)
    for (long q = 0; q < 8; ++q) c.col(q).setConstant(hashed(col + q, sc, p));
  const Matrix d = rpsim::sim::gemm(model, a, b, c);
  std::string out;
  for (long r = 0; r < 8; ++r)
    for (long q = 0; q < 8; ++q) {
      const float f = static_cast<float>(d(r, q));
      std::uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      if (!out.empty()) out += ' ';
      out += std::to_string(bits);
    }
  return source.empty() ? out : out + " # " + source;
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream in(line);
    try {
      std::cout << block(in) << '\n';
    } catch (const std::exception& e) {
      std::cout << "error: " << e.what() << '\n';
    }
    std::cout.flush();
  }
  return 0;
}
