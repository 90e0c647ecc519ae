// The kernel-schedule layer (kernel_schedule.hpp): chunks of K, spec strings
// and JSON, the cuBLAS H100 preset's shape table, and the arithmetic checked
// against the Tensor Core dot product it is built from (one chain per chunk,
// chunk results added in binary32).
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"

using rpsim::sim::AccumulationModel;
using rpsim::sim::KernelSchedule;
using rpsim::sim::Matrix;
namespace formats = rpsim::formats;

namespace {

KernelSchedule schedule(const std::string& spec) {
  return std::get<KernelSchedule>(AccumulationModel::parse(spec).variant());
}

std::vector<int> lengths(const KernelSchedule& s, int k) {
  std::vector<int> out;
  for (const auto& c : s.chunks(k)) out.push_back(c.end - c.begin);
  return out;
}

Matrix random_in(Eigen::Index r, Eigen::Index c, const rpsim::Format& f, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = nd(rng);
  return rpsim::sim::round_to_format(m, f);
}

double f32(double x) {
  return static_cast<double>(static_cast<float>(x));
}

}  // namespace

TEST_CASE("kernel schedule: split-K slices and promotion chunks", "[kernel]") {
  // cuBLAS's rule: ceil(ceil(K/tile)/S) tiles per slice, the short slice last.
  CHECK(lengths(schedule("kernel:h100:fp16:fp32:split_k=3"), 4096) == std::vector<int>{1408, 1408, 1280});
  std::vector<int> tf32(21, 192);
  tf32.push_back(64);
  CHECK(lengths(schedule("kernel:h100:tf32:fp32:split_k=22:split_tile=32"), 4096) == tf32);
  CHECK(lengths(schedule("kernel:h100:tf32:fp32:split_k=8:split_tile=32"), 256) == std::vector<int>(8, 32));
  // FP8 promotion every 4 wgmma instructions of 32: chunks of 128, one slice.
  const auto fp8 = schedule("kernel:h100:e4m3:fp32:wgmma:promotion=4").chunks(1024);
  REQUIRE(fp8.size() == 8);
  for (const auto& c : fp8) CHECK((c.end - c.begin == 128 && c.slice == 0));
  // Promotion inside split-K slices: chunks restart at every slice.
  const auto both = schedule("kernel:h100:fp16:fp32:split_k=2:promotion=3").chunks(200);
  REQUIRE(both.size() == 5);  // slices of 128 and 72: 48, 48, 32 | 48, 24
  CHECK(both[2].end == 128);
  CHECK(both[3].slice == 1);
  CHECK(lengths(schedule("kernel:h100:fp16:fp32"), 100) == std::vector<int>{100});
  CHECK(lengths(schedule("kernel:h100:fp16:fp32:split_k=64"), 100) ==
        std::vector<int>{64, 36});  // 2 tiles only
}

TEST_CASE("kernel schedule: spec strings and JSON round trip", "[kernel]") {
  for (const char* spec :
       {"kernel:h100:binary16:binary32", "kernel:h100:e4m3:bfloat16:wgmma:promotion=4",
        "kernel:h100:tf32:binary32:stored=binary32:input_rounding=rna:split_k=22:split_tile=32",
        "kernel:a100:bfloat16:bfloat16:accumulator=binary32:k_order=decreasing:reduction=pairwise",
        "kernel:h100:binary16:binary16:accumulator=binary16:split_k=2:reduction_format=binary16",
        "kernel:h100:binary16:binary32:terms_per_step=8:c_placement=accumulator",
        "cublas:h100:binary16:binary16:rpr=1", "cublas:h100:tf32:binary32"}) {
    INFO(spec);
    const auto m = AccumulationModel::parse(spec);
    CHECK(AccumulationModel::parse(m.spec()).spec() == m.spec());
  }
  CHECK(AccumulationModel::parse("kernel:h100:fp16:fp32:split_k=3").spec() ==
        "kernel:h100:binary16:binary32:split_k=3");
  CHECK(AccumulationModel::parse("cublas:h100:fp16:fp16:rpr=0").spec() == "cublas:h100:binary16:binary16");
  const auto j = AccumulationModel::from_json(nlohmann::json::parse(
      R"({"kind":"kernel","gpu":"h100","input":"tf32","output":"fp32","split_k":8,"split_tile":32,"stored":"fp32"})"));
  CHECK(j.spec() == "kernel:h100:tf32:binary32:stored=binary32:split_k=8:split_tile=32");
  const auto c = AccumulationModel::from_json(
      nlohmann::json::parse(R"({"kind":"cublas","gpu":"h100","input":"bf16","output":"bf16","rpr":1})"));
  CHECK(c.spec() == "cublas:h100:bfloat16:bfloat16:rpr=1");
  CHECK(c.input_format() == formats::bfloat16());
  CHECK(AccumulationModel::parse("cublas:h100:tf32:fp32").input_format() == formats::binary32());
  CHECK(AccumulationModel::parse("cublas:h100:fp16:bf16").output_format() == formats::bfloat16());
}

TEST_CASE("kernel schedule: bad specs name the field or the value", "[kernel]") {
  const std::pair<const char*, const char*> bad[] = {
      {"kernel:h100:fp16", "GPU:IN:OUT"},
      {"kernel:h100:fp16:fp32:split_k=0", "split_k 0"},
      {"kernel:h100:fp16:fp32:split_k=x", "split_k='x'"},
      {"kernel:h100:fp16:fp32:colour=red", "colour"},
      {"kernel:h100:fp16:fp32:reduction=random", "reduction='random'"},
      {"kernel:h100:fp16:fp32:output_rounding=sr", "output_rounding='sr'"},
      {"kernel:h100:fp16:fp32:stored=binary64", "binary64"},
      {"kernel:h100:fp17:fp32", "fp17"},
      {"kernel:z80:fp16:fp32", "z80"},
      {"kernel:h100:fp16:fp32:split_k=2:wgmma", "wgmma"},
      {"cublas:h100:fp16", "IN:OUT"},
      {"cublas:h100:fp16:fp32:rpr=2", "rpr=2"},
      {"cublas:h100:fp64:fp32", "fp64"},
      {"cublas:h100:fp16:e4m3", "e4m3"},
      {"cublas:a100:fp16:fp32", "cublas:a100"},
      {"kernel:h100:fp16:fp32:seed=3", "seed"},
  };
  for (const auto& [spec, names] : bad) {
    INFO(spec);
    CHECK_THROWS_WITH(AccumulationModel::parse(spec), Catch::Contains(names));
  }
}

TEST_CASE("kernel schedule: the cuBLAS H100 preset's shape table", "[kernel]") {
  const auto fp16 = rpsim::sim::kernel_preset("cublas:h100", formats::binary16(), formats::binary32(), 0);
  CHECK(fp16.for_shape(64, 64, 256).split_k == 1);
  CHECK(fp16.for_shape(256, 128, 1024).split_k == 1);
  CHECK(fp16.for_shape(128, 128, 4096).split_k == 3);
  CHECK(fp16.for_shape(128, 128, 4096).instruction.output == formats::binary32());
  // the H100 shape grid (cublas_h100_grid.hpp): 2 slices from K = 3072 at small outputs, fewer as
  // the output fills the SMs; an unmeasured shape takes its nearest measured shape's slices (grid
  // and rand capture), moved along K by the rule that each slice keeps more than 20 k-tiles of 64
  CHECK(fp16.for_shape(64, 64, 3072).split_k == 2);
  CHECK(fp16.for_shape(64, 64, 12288).split_k == 9);
  CHECK(fp16.for_shape(4096, 4096, 12288).split_k == 1);
  CHECK(fp16.for_shape(70, 60, 11000).split_k == 8);      // 172 k-tiles: 8 x 22 (9 would leave 20)
  CHECK(fp16.for_shape(48, 48, 16384).split_k == 12);     // past the measured K: 256 k-tiles, 12 x 22
  CHECK(fp16.for_shape(40, 40, 2560).split_k == 1);       // 40 k-tiles: no slice would keep 21
  CHECK(fp16.for_shape(4000, 4000, 16384).split_k == 1);  // a full output: one chain
  const auto tf32 = rpsim::sim::kernel_preset("cublas:h100", formats::tf32(), formats::binary32(), 0);
  CHECK(tf32.for_shape(64, 64, 256).split_k == 8);
  CHECK(tf32.for_shape(256, 128, 1024).split_k == 16);
  CHECK(tf32.for_shape(128, 128, 4096).split_k == 22);
  CHECK(tf32.for_shape(128, 128, 4096).split_tile == 32);
  CHECK(tf32.for_shape(64, 64, 256).stored == formats::binary32());
  CHECK(tf32.for_shape(64, 64, 256).input_rounding == rpsim::RoundingMode::nearest_even);
  // unmeasured: the slices of the shape nearest in log M + log N + log K (the rand capture's
  // 32x32x512: 16 slices), in 8-k granules as K is off the 32-k tile
  CHECK(tf32.for_shape(32, 32, 300).split_k == 16);
  CHECK(tf32.for_shape(32, 32, 300).split_tile == 8);
  const auto fp8 = rpsim::sim::kernel_preset("cublas:h100", formats::e4m3(), formats::bfloat16(), 0);
  for (long k : {256L, 1024L, 4096L}) {
    CHECK(fp8.for_shape(64, 64, k).promotion == 4);
    CHECK(fp8.for_shape(64, 64, k).instruction.terms_per_step == 32);
    CHECK(fp8.for_shape(64, 64, k).instruction.result_bits() == 13);
  }
  // rpr changes nothing measured.
  const auto bf1 = rpsim::sim::kernel_preset("cublas:h100", formats::bfloat16(), formats::bfloat16(), 1);
  CHECK(
      AccumulationModel(bf1.for_shape(128, 128, 4096)).spec() ==
      AccumulationModel(rpsim::sim::kernel_preset("cublas:h100", formats::bfloat16(), formats::bfloat16(), 0)
                            .for_shape(128, 128, 4096))
          .spec());
}

TEST_CASE("kernel schedule: split-K is chains from zero added in binary32", "[kernel]") {
  const auto& h = formats::binary16();
  const Matrix a = random_in(3, 700, h, 1), b = random_in(700, 5, h, 2);
  const auto instr = rpsim::sim::tensor_core_preset("h100", h, formats::binary32());
  for (const char* reduction : {"sequential", "reverse"}) {
    const auto s = schedule(std::string("kernel:h100:fp16:fp32:split_k=3:reduction=") + reduction);
    const Matrix d = rpsim::sim::gemm(AccumulationModel(s), a, b);
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < b.cols(); ++j) {
        std::vector<double> part;
        for (const auto& c : s.chunks(700)) {
          std::vector<double> x, y;
          for (int t = c.begin; t < c.end; ++t) {
            x.push_back(a(i, t));
            y.push_back(b(t, j));
          }
          part.push_back(rpsim::sim::tensor_core_dot(instr, x, y, 0.0));
        }
        REQUIRE(part.size() == 3);  // 256, 256, 188
        const double want = std::string(reduction) == "sequential" ? f32(f32(part[0] + part[1]) + part[2])
                                                                   : f32(f32(part[2] + part[1]) + part[0]);
        CHECK(d(i, j) == want);
        CHECK(AccumulationModel(s).dot_strided(a.data() + i, a.rows(), b.col(j).data(), 1, 700, 0.0, 0) ==
              want);
      }
  }
}

TEST_CASE("kernel schedule: a plain schedule is the tc chain, promotion equals split-K with the same chunks",
          "[kernel]") {
  const auto& h = formats::binary16();
  const Matrix a = random_in(4, 512, h, 3), b = random_in(512, 6, h, 4);
  const Matrix c = random_in(4, 6, formats::binary32(), 5);
  const auto tc = AccumulationModel::parse("tc:h100:fp16:fp32");
  const auto plain = AccumulationModel::parse("kernel:h100:fp16:fp32:c_placement=accumulator");
  CHECK(rpsim::sim::gemm(tc, a, b, c) == rpsim::sim::gemm(plain, a, b, c));
  // Promotion every 4 instructions of 16 = chunks of 64 = split-K 8 over 64-k tiles.
  const auto promoted = AccumulationModel::parse("kernel:h100:fp16:fp32:promotion=4");
  const auto split = AccumulationModel::parse("kernel:h100:fp16:fp32:split_k=8");
  CHECK(rpsim::sim::gemm(promoted, a, b) == rpsim::sim::gemm(split, a, b));
  CHECK(rpsim::sim::gemm(promoted, a, b) != rpsim::sim::gemm(tc, a, b));
  // C in the epilogue: the chain's result plus C, one binary32 addition.
  const Matrix plain_d = rpsim::sim::gemm(AccumulationModel::parse("kernel:h100:fp16:fp32"), a, b);
  const Matrix with_c = rpsim::sim::gemm(AccumulationModel::parse("kernel:h100:fp16:fp32"), a, b, c);
  for (Eigen::Index i = 0; i < c.size(); ++i) CHECK(with_c.data()[i] == f32(plain_d.data()[i] + c.data()[i]));
}

TEST_CASE("kernel schedule: output conversion, tf32 input conversion, decreasing k order", "[kernel]") {
  const auto& h = formats::binary16();
  const Matrix a = random_in(4, 256, h, 6), b = random_in(256, 4, h, 7);
  const Matrix d32 = rpsim::sim::gemm(AccumulationModel::parse("kernel:h100:fp16:fp32"), a, b);
  const Matrix d16 = rpsim::sim::gemm(AccumulationModel::parse("kernel:h100:fp16:fp16"), a, b);
  CHECK(d16 == rpsim::sim::round_to_format(d32, h));  // binary32 chain, then RNE
  const Matrix z16 =
      rpsim::sim::gemm(AccumulationModel::parse("kernel:h100:fp16:fp16:output_rounding=rtz"), a, b);
  CHECK(z16 == rpsim::sim::round_to_format(d32, h, rpsim::RoundingMode::toward_zero));
  // The reverse k order is another chain.
  CHECK(rpsim::sim::gemm(AccumulationModel::parse("kernel:h100:fp16:fp32:k_order=decreasing"), a, b) != d32);
  // tf32 from binary32: the conversion is the stated rounding of the inputs.
  const auto& f = formats::binary32();
  const Matrix x = random_in(4, 64, f, 8), y = random_in(64, 4, f, 9);
  for (auto mode : {rpsim::RoundingMode::nearest_even, rpsim::RoundingMode::toward_zero}) {
    const auto s = AccumulationModel::parse(std::string("kernel:h100:tf32:fp32:stored=fp32:input_rounding=") +
                                            (mode == rpsim::RoundingMode::nearest_even ? "rne" : "rtz"));
    const Matrix got = rpsim::sim::gemm(s, x, y);
    const Matrix want = rpsim::sim::gemm(AccumulationModel::parse("tc:h100:tf32:fp32"),
                                         rpsim::sim::round_to_format(x, formats::tf32(), mode),
                                         rpsim::sim::round_to_format(y, formats::tf32(), mode));
    CHECK(got == want);
  }
}

TEST_CASE("tensor core chain: GEMM and dot agree on signed zeros and infinities", "[kernel]") {
  const auto m = AccumulationModel::parse("tc:h100:fp16:fp32");
  Matrix a(1, 20), b(20, 2), c(1, 2);
  a.setConstant(-0.0);
  b.setConstant(0.0);
  c << -0.0, 0.0;
  // Every term -0 and C = -0: the step's exact zero is +0 (MMA-Sim's rule,
  // tensor_core_chain.hpp zero_sum_result), in the GEMM as in the dot.
  const Matrix d = rpsim::sim::gemm(m, a, b, c);
  CHECK((d(0, 0) == 0 && !std::signbit(d(0, 0))));
  CHECK((d(0, 1) == 0 && !std::signbit(d(0, 1))));
  for (int j = 0; j < 2; ++j)
    CHECK(std::signbit(m.dot_strided(a.data(), 1, b.col(j).data(), 1, 20, c(0, j), 0)) ==
          std::signbit(d(0, j)));
  // A chain that overflows stays infinite in the GEMM as in the dot product.
  // (binary16 output: 16 products of 300*300 overflow the first step.)
  const auto m16 = AccumulationModel::parse("tc:h100:fp16:fp16");
  a.setConstant(300.0);
  b.setConstant(300.0);
  const Matrix big = rpsim::sim::gemm(m16, a, b);
  CHECK((std::isinf(big(0, 0)) && big(0, 0) > 0));
  CHECK(m16.dot_strided(a.data(), 1, b.col(0).data(), 1, 20, 0.0, 0) == big(0, 0));
}
