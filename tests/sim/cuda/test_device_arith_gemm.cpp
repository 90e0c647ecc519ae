// device-arith: the CUDA GEMM kernels' per-element composition, on the host,
// with nvcc's build of the shared code (device_arith.cu) against the CPU's
// gemm(): the sequential sums (every format and mode, stochastic rounding's
// streams i*N + j included), and the block-FMA schedules as backend_tc.cu
// walks them (the schedule's plan chunk by chunk, each chunk folded into its
// split-K slice, the fold's reduction, scales, C and output rounding), for
// the cuBLAS presets, split-K, FP8 promotion, decreasing K and tf32's input
// conversion.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "device_arith.hpp"
#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/schedule_plan.hpp"
#include "rpsim/formats/array.hpp"

using namespace rpsim;
using namespace rpsim::sim;

namespace {

bool same(double x, double y) {
  return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
}

// Values of f, spread over a few binades either side of 1 with some zeros.
Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, const Format& f, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double x = gen() % 17 == 0 ? 0.0 : std::ldexp(u(gen), int(gen() % 9) - 4);
    m.data()[i] = to_double(f, round_double(f, x, RoundingMode::nearest_even));
  }
  return m;
}

// One element of D as backend_tc.cu computes it.
double schedule_element(const KernelSchedule& s, const SchedulePlan& plan, const TcStep& p,
                        const FoldDesc& fold, const double* a, const double* b, double c, double sa,
                        double sb) {
  const tc_detail::PlanView view{plan.order.data(), plan.begin.data(), plan.first.data(), plan.last.data()};
  const bool c_first = s.c_placement == CPlacement::accumulator;
  const int slices = plan.chunk_slice.empty() ? 1 : plan.chunk_slice.back() + 1;
  const bool plain = sa == 1 && sb == 1 && s.is_plain_chain() && plan.chunks() == 1;
  std::vector<double> partials(std::size_t(slices), 0.0);
  double result = 0;
  for (int q = 0; q < plan.chunks(); ++q) {
    const double start = q == 0 && c_first ? c : 0.0;
    const double x = device_arith::tc_plan_steps(p, view, plan.chunk_step[std::size_t(q)],
                                                 plan.chunk_step[std::size_t(q) + 1], a, b, start);
    if (plain) {
      result = x;
      continue;
    }
    const int slice = plan.chunk_slice[std::size_t(q)];
    const bool first = q == 0 || plan.chunk_slice[std::size_t(q) - 1] != slice;
    double& part = partials[std::size_t(slice)];
    part = first ? x : device_arith::fold_add(formats::binary32(), fold.promotion_rounding, part, x);
  }
  return plain ? result : device_arith::fold_result(fold, partials.data(), slices, c, sa, sb);
}

// D under schedule s, each element through nvcc's code, operands converted to
// the instruction's input as the kernel converts them.
Matrix schedule_gemm(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix& c, double sa,
                     double sb) {
  const SchedulePlan plan = schedule_plan(s, int(a.cols()));
  const TcStep p = tc_step_of(s.instruction);
  const FoldDesc fold = fold_desc_of(s);
  RoundingDesc in_rounding;
  in_rounding.mode = s.input_rounding;
  auto convert = [&](double x) {
    if (s.stored == s.instruction.input) return x;
    Flags f = 0;
    return std::bit_cast<double>(device_arith::widen_to_binary64(
        s.instruction.input, device_arith::round_binary64(s.instruction.input, x, in_rounding, f)));
  };
  Matrix d(a.rows(), b.cols());
  std::vector<double> row(std::size_t(a.cols())), col(std::size_t(a.cols()));
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    for (Eigen::Index k = 0; k < a.cols(); ++k) row[std::size_t(k)] = convert(a(i, k));
    for (Eigen::Index j = 0; j < b.cols(); ++j) {
      for (Eigen::Index k = 0; k < a.cols(); ++k) col[std::size_t(k)] = convert(b(k, j));
      d(i, j) = schedule_element(s, plan, p, fold, row.data(), col.data(), c(i, j), sa, sb);
    }
  }
  return d;
}

std::size_t count_mismatches(const Matrix& want, const Matrix& got) {
  std::size_t n = 0;
  for (Eigen::Index i = 0; i < want.size(); ++i) n += !same(want.data()[i], got.data()[i]);
  return n;
}

}  // namespace

TEST_CASE("device-arith: kernel schedules and cuBLAS presets, element by element, equal the CPU's gemm",
          "[device-arith]") {
  std::mt19937_64 gen(99);
  const char* const specs[] = {
      "tc:h100:fp16:fp32",
      "tc:h100:e4m3:fp16",
      "tc:h100:e5m2:fp32",
      "tc:b200:bf16:fp32:tcgen05.mma",
      "cublas:h100:fp16:fp32",
      "cublas:h100:fp16:fp16:rpr=1",
      "cublas:h100:bf16:bf16",
      "cublas:h100:tf32:fp32",
      "cublas:h100:e4m3:fp32",
      "cublas:h100:e4m3:bf16:fast_accum=1",
      "kernel:h100:fp16:fp32:split_k=3",
      "kernel:h100:bf16:fp16:split_k=4:reduction=pairwise:reduction_format=binary16",
      "kernel:h100:fp16:fp32:k_order=decreasing:split_k=2:reduction=reverse",
      "kernel:h100:e4m3:fp32:wgmma:promotion=4",
      "kernel:a100:tf32:fp32:stored=binary32:input_rounding=rna",
      "kernel:h100:fp16:bf16:c_placement=accumulator:output_rounding=rtz",
  };
  std::size_t elements = 0, mismatches = 0;
  for (const char* spec : specs) {
    const AccumulationModel model = AccumulationModel::parse(spec);
    for (const auto& [m, k, n] : {std::tuple{5, 200, 6}, std::tuple{3, 37, 4}, std::tuple{2, 1030, 3}}) {
      const KernelSchedule s = std::holds_alternative<KernelPreset>(model.variant())
                                   ? std::get<KernelPreset>(model.variant()).for_shape(m, n, k)
                                   : std::get<KernelSchedule>(model.variant());
      const Matrix a = random_matrix(m, k, s.stored, gen), b = random_matrix(k, n, s.stored, gen);
      const Matrix c = random_matrix(m, n, s.output, gen);
      const Matrix want = gemm(model, a, b, c);
      const std::size_t bad = count_mismatches(want, schedule_gemm(s, a, b, c, 1, 1));
      INFO(spec << " " << m << "x" << k << "x" << n);
      CHECK(bad == 0);
      elements += std::size_t(want.size());
      mismatches += bad;
    }
  }
  // torch._scaled_mm's per-tensor scales through the schedule's epilogue.
  const AccumulationModel fp8 = AccumulationModel::parse("cublas:h100:e4m3:fp32");
  const Matrix a = random_matrix(4, 96, formats::e4m3(), gen), b = random_matrix(96, 5, formats::e4m3(), gen);
  const Matrix c = Matrix::Zero(4, 5);
  GemmScales scales;
  scales.scale_a = Matrix::Constant(1, 1, 0.375);
  scales.scale_b = Matrix::Constant(1, 1, 3.0);
  const Matrix want = gemm(fp8, a, b, c, scales);
  const KernelSchedule s = std::get<KernelPreset>(fp8.variant()).for_shape(4, 5, 96);
  CHECK(count_mismatches(want, schedule_gemm(s, a, b, c, 0.375, 3.0)) == 0);
  CHECK(mismatches == 0);
  std::cout << "device-arith schedules: " << elements << " elements, " << mismatches << " mismatches"
            << std::endl;
}

TEST_CASE("device-arith: sequential sums in every format and mode equal the CPU's gemm", "[device-arith]") {
  std::mt19937_64 gen(7);
  std::size_t elements = 0, mismatches = 0;
  for (const char* spec :
       {"sequential:fp32:rne", "sequential:fp64:rne", "sequential:bf16:sr:seed=11", "sequential:fp16:rtz",
        "sequential:fp16:rna", "sequential:e5m2:rd", "sequential:tf32:ru", "sequential:fp32:sr:seed=3",
        "sequential:q16.14:rne", "sequential:fp32:rodd"}) {
    const AccumulationModel model = AccumulationModel::parse(spec);
    const auto& seq = std::get<Sequential>(model.variant());
    const Matrix a = random_matrix(6, 75, formats::binary32(), gen),
                 b = random_matrix(75, 7, formats::binary32(), gen);
    const Matrix c = random_matrix(6, 7, seq.acc.format, gen);
    const Matrix want = gemm(model, a, b, c);
    std::vector<double> row(75), col(75);
    for (Eigen::Index i = 0; i < 6; ++i)
      for (Eigen::Index j = 0; j < 7; ++j) {
        for (int k = 0; k < 75; ++k) {
          row[std::size_t(k)] = a(i, k);
          col[std::size_t(k)] = b(k, j);
        }
        const AccumulatorOps ops = accumulator_ops(seq.acc, std::uint64_t(i) * 7 + std::uint64_t(j));
        const double got = device_arith::sequential(ops, row.data(), col.data(), 75, c(i, j));
        ++elements;
        mismatches += !same(got, want(i, j));
      }
    INFO(spec);
    CHECK(mismatches == 0);
  }
  std::cout << "device-arith sequential: " << elements << " elements, " << mismatches << " mismatches"
            << std::endl;
}
