// The datapaths MMA-Sim models beyond NVIDIA's block FMA (tensor_core.hpp,
// Datapath), block scales, mixed operands and the new presets, on cases
// worked out by hand (the shared MMA-Sim vectors check them in bulk:
// tests/sim/validation/test_mma_sim.cpp).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/accumulation/tensor_core_operands.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"

using namespace rpsim;
using namespace rpsim::sim;

namespace {
const Format f64 = parse_format("binary64"), f32 = parse_format("binary32"), f16 = parse_format("binary16"),
             bf16 = parse_format("bfloat16"), e4m3 = parse_format("e4m3"), e5m2 = parse_format("e5m2"),
             e2m1 = parse_format("e2m1"), ue8m0 = parse_format("e8m0");
double dot(const TensorCoreModel& m, std::vector<double> a, std::vector<double> b, double c) {
  return tensor_core_dot(m, a, b, c);
}
}  // namespace

TEST_CASE("tensor core paths: FP64 mma is a chain of binary64 FMAs", "[tc][paths]") {
  const auto m = tensor_core_preset("h100", f64, f64);
  CHECK(m.datapath == Datapath::fma_chain);
  // (1 + 2^-52)(1 - 2^-52) = 1 - 2^-104: one fma keeps it, a rounded product would not.
  const double u = std::ldexp(1.0, -52);
  CHECK(dot(m, {1 + u}, {1 - u}, -1.0) == -std::ldexp(1.0, -104));
  // In k order: big + 1 - big loses the 1.
  CHECK(dot(m, {1e300, 1, -1e300}, {1, 1, 1}, 0) == 0.0);
}

TEST_CASE("tensor core paths: AMD CDNA1 pairwise binary32 FMA tree vs CDNA3 fused dot", "[tc][paths]") {
  // 2^24, 1, 1, -2^24 (K = 4, one group on CDNA1 f16... as values exact in f16 after scaling):
  // use 2^12 * 2^12 products. CDNA1's tree: (2^24 + 1) + (1 - 2^24) in binary32
  // = 2^24 + (-2^24 + 1) = 1 (the left pair rounds 2^24 + 1 to 2^24).
  const auto cdna1 = tensor_core_preset("mi100", f16, f32, "mfma");
  CHECK(cdna1.datapath == Datapath::pairwise_fma);
  const double t = 4096;
  CHECK(dot(cdna1, {t, 1, 1, -t}, {t, 1, 1, t}, 0) == 1.0);
  // CDNA3's fused dot keeps 24 bits below 2^24's exponent + 1 ... the two ones survive: 2.
  const auto cdna3 = tensor_core_preset("mi300", f16, f32, "mfma");
  CHECK(cdna3.datapath == Datapath::fused_round_down);
  CHECK(dot(cdna3, {t, 1, 1, -t}, {t, 1, 1, t}, 0) == 2.0);
  // Round-down alignment of C: a negative C far below the sum is floored one
  // unit (2^-24 of 2^0) below: 1 - 2^-60 -> 1 - 2^-24, then RNE to binary32.
  CHECK(dot(cdna3, {1}, {1}, -std::ldexp(1.0, -60)) == 1.0 - std::ldexp(1.0, -24));
  // CDNA2 flushes subnormal inputs: 2^-20 * 1 is read as 0.
  const auto cdna2 = tensor_core_preset("mi250", f16, f32, "mfma");
  CHECK(dot(cdna2, {std::ldexp(1.0, -20)}, {1}, 0) == 0.0);
  CHECK(dot(cdna1, {std::ldexp(1.0, -20)}, {1}, 0) == std::ldexp(1.0, -20));
  CHECK_THROWS_WITH(tensor_core_preset("mi100", bf16, f32, "mfma.1k"), Catch::Contains("mfma.1k exists on"));
}

TEST_CASE("tensor core paths: mixed FP8 operands and f16 x bf16 take B's format", "[tc][paths]") {
  const auto m = tensor_core_preset("h100", e4m3, f32, "wgmma", e5m2, nullptr, 0);
  REQUIRE(m.input_b.has_value());
  CHECK(m.b_input() == e5m2);
  CHECK(dot(m, {448}, {57344}, 0) == 448.0 * 57344.0);
  const auto t = tensor_core_preset("b200", f16, f32, "tcgen05.mma", bf16, nullptr, 0);
  CHECK(t.b_input() == bf16);
  CHECK_THROWS_WITH(tensor_core_preset("h100", f16, f32, "tcgen05.mma"), Catch::Contains("exists on b200"));
}

TEST_CASE("tensor core paths: block scales join the products' exponents, mxf4nvf4 groups of 16",
          "[tc][paths]") {
  const auto m = tensor_core_preset("b200", e2m1, f32, "tcgen05.mma", e2m1, &ue8m0, 16);
  CHECK(m.product_group == 16);
  CHECK(m.fraction_bits == 35);
  std::vector<double> a(64, 0.0), b(64, 0.0);
  a[16] = 0.5;
  b[16] = 0.5;  // group 1: 0.25, every other group's sum 0
  // The groups align at their scales' exponents, whatever their sums: with
  // groups 0, 2, 3 at scale 2^0 (sums 0), group 1's 0.25 * 2^-40 = 2^-42 lies
  // below the 35 bits kept under 2^0 and is lost (MMA-Sim
  // nv_fused_dot_add_with_block_scale); with every scale 2^-40 it is kept.
  const double s40 = std::ldexp(1.0, -40);
  const std::vector<double> sa{1, s40, 1, 1}, sb{1, 1, 1, 1}, all40{s40, s40, s40, s40}, ones{1, 1, 1, 1};
  CHECK(tensor_core_dot_bits(m, a, b, 0.0, sa, sb) == 0u);
  CHECK(tensor_core_dot_bits(m, a, b, 0.0, all40, ones) ==
        std::bit_cast<std::uint32_t>(static_cast<float>(std::ldexp(1.0, -42))));
  // A NaN scale gives NaN.
  const std::vector<double> nan_s{std::numeric_limits<double>::quiet_NaN(), 1, 1, 1};
  CHECK(tensor_core_dot_bits(m, a, b, 0.0, nan_s, sb) == 0x7fffffffu);
  CHECK_THROWS_WITH(tensor_core_preset("b200", e2m1, f32, "tcgen05.mma", e2m1, &f16, 16),
                    Catch::Contains("is not ue8m0 or ue4m3"));
}

TEST_CASE("tensor core paths: operand classes are one table", "[tc][paths]") {
  CHECK(tensor_core_operand_class(f16)->golden_folder == "fp16");
  CHECK(tensor_core_operand_class(e4m3)->golden_folder == "E4M3");
  CHECK(tensor_core_operand_class_by_folder("e5m2")->format == "e5m2");
  CHECK(tensor_core_operand_class_by_mma_sim("fp8")->format == "e4m3fnuz");
  CHECK(tensor_core_operand_class(parse_format("e3m2")) == nullptr);
}

TEST_CASE("tensor core paths: a GEMM under an AMD preset is the per-element chain", "[tc][paths][gemm]") {
  const auto model = AccumulationModel::parse("tc:mi100:fp32:fp32:mfma");
  Matrix a(1, 3), b(3, 1), c(1, 1);
  a << 1e8f, 1, -1e8f;
  b << 1, 1, 1;
  c << 0;
  // fmaf chain in k order: 1e8 + 1 rounds to 1e8 in binary32, then - 1e8 = 0.
  CHECK(gemm(model, a, b, c)(0, 0) == 0.0);
}
