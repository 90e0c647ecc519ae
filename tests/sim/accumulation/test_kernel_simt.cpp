// cuBLAS's CUDA-core kernel orders (kernel_schedule.hpp SimtOrder,
// kernel_simt.cpp) against plain loops written from bitequiv's description
// of each kernel (facebookexperimental/triton bitequiv/cublas_match/
// kernels.py, measured on sm_100; unmeasured on the H100). The data spread
// over many binades so that every order gives other bits (checked).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"

using rpsim::sim::AccumulationModel;
using rpsim::sim::Matrix;

namespace {

// x_k = a_k * b_k with b = 1: fp16 values over 2^-14 .. 2^14, signs mixed (their
// binary32 sums round at most steps).
std::vector<float> spread(int k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> e(-14, 14);
  std::vector<float> x(std::size_t(k), 0.0f);
  for (auto& v : x) {
    const double r = std::exp2(e(rng)) * (rng() % 2 ? 1 : -1);
    v = float(rpsim::sim::round_to_format(Matrix::Constant(1, 1, r), rpsim::formats::binary16())(0, 0));
  }
  return x;
}

double run(const std::string& spec, const std::vector<float>& x) {
  Matrix a(1, Eigen::Index(x.size())), b = Matrix::Ones(Eigen::Index(x.size()), 1);
  for (std::size_t i = 0; i < x.size(); ++i) a(0, Eigen::Index(i)) = x[i];
  return rpsim::sim::gemm(AccumulationModel::parse(spec), a, b)(0, 0);
}

const std::string kBase = "kernel:h100:fp16:fp32:";

// gemmSN: thread t owns [t*CH, (t+1)*CH), sub-blocks of SUB each chained from
// zero, added into the thread's sum; the threads' sums in order.
float gemmsn_loops(const std::vector<float>& x, int threads, int sub) {
  const int k = int(x.size()), ch = (k + threads - 1) / threads;
  float total = 0;
  for (int t = 0; t < threads; ++t) {
    float part = 0;
    for (int s0 = t * ch; s0 < std::min(k, (t + 1) * ch); s0 += sub) {
      float s = 0;
      for (int i = s0; i < std::min({k, (t + 1) * ch, s0 + sub}); ++i) s += x[std::size_t(i)];
      part += s;
    }
    total += part;
  }
  return total;
}

// gemv: lane l owns the V products at t*V*W + l*V of tile t; lanes by a
// count-down butterfly (off = W/2 ... 1) or in order.
float gemv_loops(const std::vector<float>& x, int w, int v, bool butterfly) {
  std::vector<float> lane(std::size_t(w), 0.0f);
  for (int l = 0; l < w; ++l)
    for (int base = l * v; base < int(x.size()); base += v * w)
      for (int e = 0; e < v && base + e < int(x.size()); ++e)
        lane[std::size_t(l)] += x[std::size_t(base + e)];
  if (!butterfly) {
    float t = lane[0];
    for (int l = 1; l < w; ++l) t += lane[std::size_t(l)];
    return t;
  }
  for (int off = w / 2; off >= 1; off /= 2)
    for (int l = 0; l < off; ++l) lane[std::size_t(l)] += lane[std::size_t(l + off)];
  return lane[0];
}

// gemv with contiguous lanes: lane l owns [l*S, (l+1)*S), S = ceil(K/W), in
// chunks of C each chained from zero; the lanes in order.
float gemv_slices_loops(const std::vector<float>& x, int w, int c) {
  const int k = int(x.size()), s = (k + w - 1) / w;
  float total = 0;
  for (int l = 0; l < w; ++l) {
    float lane = 0;
    bool first = true;
    for (int c0 = l * s; c0 < std::min(k, (l + 1) * s); c0 += c) {
      float chunk = 0;
      for (int i = c0; i < std::min({k, (l + 1) * s, c0 + c}); ++i) chunk += x[std::size_t(i)];
      lane = first ? chunk : lane + chunk;
      first = false;
    }
    total = l == 0 ? lane : total + lane;
  }
  return total;
}

}  // namespace

TEST_CASE("kernel simt: gemmSN, gemv and gemv with contiguous lanes follow their orders", "[kernel]") {
  // Data on which the orders give three sums (so a wrong order cannot pass).
  std::vector<float> x;
  for (std::uint64_t seed = 3; seed < 60 && x.empty(); ++seed) {
    const auto t = spread(1000, seed);
    const float a = gemmsn_loops(t, 4, 128), b = gemmsn_loops(t, 16, 32), c = gemv_loops(t, 32, 4, true);
    if (a != b && a != c && b != c) x = t;
  }
  REQUIRE(!x.empty());
  CHECK(run(kBase + "simt=gemmsn:simt_threads=4:simt_sub=128", x) == gemmsn_loops(x, 4, 128));
  CHECK(run(kBase + "simt=gemmsn:simt_threads=16:simt_sub=32", x) == gemmsn_loops(x, 16, 32));
  CHECK(run(kBase + "simt=gemmsn", x) == gemmsn_loops(x, 1, 1000));  // magma_sgemmEx: one chain
  CHECK(run(kBase + "simt=gemv:simt_threads=32:simt_vector=4:simt_combine=butterfly", x) ==
        gemv_loops(x, 32, 4, true));
  CHECK(run(kBase + "simt=gemv:simt_threads=32:simt_vector=4", x) == gemv_loops(x, 32, 4, false));
  // bitequiv's worked example: K = 581, 32 lanes, S = 19, chunks of 16.
  const auto y = spread(581, 4);
  CHECK(run(kBase + "simt=gemv_slices:simt_threads=32:simt_sub=16", y) == gemv_slices_loops(y, 32, 16));
}

TEST_CASE("kernel simt: the dot kernel's strided blocks and reduce_1Block", "[kernel]") {
  // NB = 3 blocks, V = 2: block blk owns tiles blk, blk + 3, ... of 256
  // products; thread t keeps 2 chains (products t*2 and t*2 + 1 of each of
  // its tiles), added; 128 threads by a count-down butterfly; then
  // reduce_1Block: with NB <= 32 its folds add zeros, so the blocks' partials
  // p0, p1, p2 end as ((p0 + p1) + p2) + 0 (u0 = p0, u1 = p1, u2 = p2).
  const auto x = spread(4000, 5);
  std::vector<float> p(3, 0.0f);
  for (int blk = 0; blk < 3; ++blk) {
    std::vector<float> thr(128, 0.0f);
    for (int e = 0; e < 2; ++e)
      for (int t = 0; t < 128; ++t) {
        float chain = 0;
        for (int tile = blk; tile * 256 < 4000; tile += 3)
          if (tile * 256 + t * 2 + e < 4000) chain += x[std::size_t(tile * 256 + t * 2 + e)];
        thr[std::size_t(t)] += chain;
      }
    for (int off = 64; off >= 1; off /= 2)
      for (int t = 0; t < off; ++t) thr[std::size_t(t)] += thr[std::size_t(t + off)];
    p[std::size_t(blk)] = thr[0];
  }
  CHECK(run(kBase + "simt=dot:split_k=3:simt_vector=2", x) == ((p[0] + p[1]) + p[2]) + 0.0f);
  // One block: its butterfly total alone.
  CHECK(run(kBase + "simt=dot:split_k=1:simt_vector=2", x) !=
        run(kBase + "simt=dot:split_k=3:simt_vector=2", x));
}

TEST_CASE("kernel simt: C joins in the epilogue, the fields are checked", "[kernel]") {
  const auto x = spread(300, 6);
  Matrix a(1, 300), b = Matrix::Ones(300, 1), c = Matrix::Constant(1, 1, 0.5);
  for (int i = 0; i < 300; ++i) a(0, i) = x[std::size_t(i)];
  const auto m = AccumulationModel::parse(kBase + "simt=gemmsn:simt_threads=2:simt_sub=64");
  CHECK(rpsim::sim::gemm(m, a, b, c)(0, 0) == double(gemmsn_loops(x, 2, 64) + 0.5f));
  CHECK_THROWS_WITH(AccumulationModel::parse(kBase + "simt=gemv:simt_threads=24:simt_combine=butterfly"),
                    Catch::Contains("power-of-two simt_threads"));
  CHECK_THROWS_WITH(AccumulationModel::parse(kBase + "simt=gemmsn:simt_threads=0"),
                    Catch::Contains("simt_threads must be in 1..1024"));
}

TEST_CASE("kernel simt: a block of outputs at once gives each output the one-output bits", "[kernel]") {
  // 37 rows (two whole blocks of 16 and a tail) by 7 columns (a whole block of
  // 4 and a tail), fp16 values over many binades (A's second half binary32
  // values, whose products round in the FFMA), for every order, with C and
  // split slices: the AVX-512 blocks against the portable one-output path,
  // and each row against that row alone (a 1 x K GEMM: one output at a time
  // whatever the CPU).
  if (std::string(rpsim::sim::gemm_kernel_isa()) != "avx512")
    WARN("this CPU has no AVX-512 kernel: both sides below run the portable path");
  const int m = 37, n = 7, k = 700;
  Matrix a(m, k), b(k, n), c(m, n);
  for (int i = 0; i < m; ++i) {
    const auto row = spread(k, 100 + std::uint64_t(i));
    for (int j = 0; j < k; ++j)
      a(i, j) = i < m / 2 ? double(row[std::size_t(j)]) : double(row[std::size_t(j)] * (1.0f + 0x1.234p-19f));
  }
  for (int j = 0; j < n; ++j) {
    const auto col = spread(k, 200 + std::uint64_t(j));
    for (int i = 0; i < k; ++i) b(i, j) = col[std::size_t(i)];
    for (int i = 0; i < m; ++i) c(i, j) = 0.25 * (i - j);
  }
  for (const char* order : {"simt=gemmsn:simt_threads=4:simt_sub=128", "simt=gemmsn",
                            "simt=gemv:simt_threads=32:simt_vector=4:simt_combine=butterfly",
                            "simt=gemv_slices:simt_threads=32:simt_sub=16",
                            "simt=dot:split_k=3:simt_vector=2", "simt=gemmsn:split_k=3"}) {
    INFO(order);
    const auto model = AccumulationModel::parse(kBase + order);
    const Matrix d = rpsim::sim::gemm(model, a, b, c);
    rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::portable);
    const Matrix portable = rpsim::sim::gemm(model, a, b, c);
    rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::best);
    int same = 0, alone = 0;
    for (int i = 0; i < m; ++i) {
      const Matrix one = rpsim::sim::gemm(model, a.row(i), b, c.row(i));
      for (int j = 0; j < n; ++j) {
        same += d(i, j) == portable(i, j);
        alone += d(i, j) == one(0, j);
      }
    }
    CHECK(same == m * n);
    CHECK(alone == m * n);
  }
}
