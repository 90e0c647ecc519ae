// Rounding of whole tensors and matmuls under an accumulation model.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <variant>
#include <vector>

#include "count_where.hpp"
#include "parallel_work.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/native_gemm.hpp"
#include "rpsim/accumulation/tiled_copy.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {
namespace {

// The formats library's round to nearest even, prepared once per format and
// thread (ValueRounding: the array kernel, inline for binary64 and binary32).
// The last format asked for is checked first: the ops of a layer ask for the
// same one many times in a row.
const ValueRounding& nearest(const Format& fmt) {
  thread_local std::vector<std::unique_ptr<ValueRounding>> prepared;
  thread_local const Format* last_format = nullptr;
  thread_local const ValueRounding* last = nullptr;
  // Equality too, not only the address: a format can die and another take its place.
  if (last_format == &fmt && last->format() == fmt) return *last;
  auto it = std::find_if(prepared.begin(), prepared.end(), [&](const auto& r) { return r->format() == fmt; });
  if (it == prepared.end()) it = prepared.insert(prepared.end(), std::make_unique<ValueRounding>(fmt));
  last_format = &fmt;
  last = it->get();
  return *last;
}

std::span<double> span_of(Matrix& m) {
  return {m.data(), std::size_t(m.size())};
}

}  // namespace

const ValueRounding& nearest_rounding(const Format& fmt) {
  return nearest(fmt);
}

double round_value(const Format& fmt, double x) {
  return nearest(fmt)(x);
}

double round_value(const Format& fmt, double x, RoundingMode mode, std::uint64_t random_bits) {
  if (mode == RoundingMode::nearest_even) return round_value(fmt, x);
  Rounding r;
  r.mode = mode;
  r.random_bits = random_bits;
  Flags flags = 0;
  return to_double(fmt, round_double(fmt, x, r, flags));
}

namespace {

// out = in rounded to fmt; `in` and `out` may be the same array. Entry i
// draws counter_random(random.seed, random.stream, i) under stochastic rounding.
void round_into(const Format& fmt, std::span<const double> in, std::span<double> out, RoundingMode mode,
                RandomStream random) {
  // binary64 holds every entry, whatever the mode: no pass over the data (the
  // FP64 shadow rounds every tensor of every op to it).
  if (fmt == formats::binary64()) {
    if (in.data() != out.data()) std::copy(in.begin(), in.end(), out.begin());
    return;
  }
  if (mode == RoundingMode::nearest_even) {
    nearest(fmt)(in, out);
    return;
  }
  ArrayOptions options;
  options.rounding.mode = mode;
  options.seed = random.seed;
  options.stream = random.stream;
  round_values(fmt, in, out, options);
}

}  // namespace

void round_in_place(const Format& fmt, Matrix& m, RoundingMode mode, RandomStream random) {
  round_into(fmt, span_of(m), span_of(m), mode, random);
}

Matrix rounded(const Format& fmt, const Matrix& m, RoundingMode mode, RandomStream random) {
  Matrix r(m.rows(), m.cols());
  round_into(fmt, {m.data(), std::size_t(m.size())}, span_of(r), mode, random);
  return r;
}

namespace {
thread_local ScopedTensorRounding::State tensor_rounding;
}  // namespace

ScopedTensorRounding::ScopedTensorRounding(RoundingMode mode, RandomStream base) : saved_(tensor_rounding) {
  tensor_rounding = State{mode, base, 0};
}

ScopedTensorRounding::~ScopedTensorRounding() {
  tensor_rounding = saved_;
}

void round_in_place(const Format& fmt, Matrix& m) {
  ScopedTensorRounding::State& s = tensor_rounding;
  // binary64 holds every entry: nothing to round, whatever the mode.
  if (s.mode == RoundingMode::nearest_even || fmt == formats::binary64())
    return round_in_place(fmt, m, RoundingMode::nearest_even);
  // A stream per call: the base stream and the call count, mixed.
  round_in_place(fmt, m, s.mode, RandomStream{s.base.seed, mix64(s.base.stream) ^ mix64(~s.calls++)});
}

bool tensor_rounding_is_nearest() {
  return tensor_rounding.mode == RoundingMode::nearest_even;
}

namespace {

// rounded_from's rule: values of `held` rounded to fmt to nearest are unchanged.
bool cast_changes_nothing(const Format& fmt, const Format& held) {
  return tensor_rounding_is_nearest() && holds(fmt, held);
}

}  // namespace

Matrix rounded_from(const Format& fmt, const Matrix& m, const Format& held) {
  return cast_changes_nothing(fmt, held) ? m : rounded(fmt, m);
}

Matrix rounded_from(const Format& fmt, Matrix&& m, const Format& held) {
  if (!cast_changes_nothing(fmt, held)) round_in_place(fmt, m);
  return std::move(m);
}

Matrix rounded(const Format& fmt, const Matrix& m) {
  // Out of place, not a copy rounded in place: the copy and the array
  // rounding's per-block copy for aliased calls were one pass of memory
  // traffic each (perf: 2.8% of an fp16-amp MLP step with the shadow).
  // The same stream as round_in_place, so the same bits.
  ScopedTensorRounding::State& s = tensor_rounding;
  Matrix r(m.rows(), m.cols());
  const std::span<const double> in{m.data(), std::size_t(m.size())};
  if (s.mode == RoundingMode::nearest_even || fmt == formats::binary64())
    round_into(fmt, in, span_of(r), RoundingMode::nearest_even, RandomStream{});
  else
    round_into(fmt, in, span_of(r), s.mode,
               RandomStream{s.base.seed, mix64(s.base.stream) ^ mix64(~s.calls++)});
  return r;
}

namespace {

// Every entry a binary32 value (or NaN): float(x) loses nothing.
bool all_binary32(const Matrix& m) {
  const double* p = m.data();
  for (Eigen::Index i = 0; i < m.size(); ++i)
    if (double(float(p[i])) != p[i] && !std::isnan(p[i])) return false;
  return true;
}

// The accumulator of a sequential, not fused, round-to-nearest-even model.
const Format* sequential_rne(const sim::AccumulationModel& model) {
  const auto* seq = std::get_if<sim::Sequential>(&model.variant());
  if (!seq || seq->fused || seq->acc.rounding != RoundingMode::nearest_even) return nullptr;
  return &seq->acc.format;
}

// The accumulators matmul_grid takes: signed zeros, subnormals, at most 25
// significand bits, and a range well inside binary64's.
bool grid_accumulator(const Format& fmt) {
  return fmt.has_sign && fmt.has_zero && fmt.subnormals && fmt.man_bits <= 24 && fmt.emin > -1000 &&
         fmt.emax < 1000;
}

// Recursive summation rounded to such a format on binary64 arithmetic: with binary32 operands a*b is
// exact in binary64, so rounding it to fmt is the product rounded once; acc
// and the rounded product are values of fmt, and rounding their binary64 sum
// to fmt equals rounding the exact sum because 53 >= 2p + 2 (double rounding
// is innocuous: Figueroa, "When is double rounding innocuous?", 1995). A row
// of C at a time, so that every rounding is an array rounding of n values;
// each c(i, j) is still acc = round(acc + round(a(i,p) * b(p,j))) for p = 0, 1, ...
Matrix matmul_grid(const Matrix& a, const Matrix& b, const Format& fmt) {
  const Eigen::Index m = a.rows(), k = a.cols(), n = b.cols();
  const std::size_t width = std::size_t(n);
  std::vector<double> b_rows(std::size_t(k) * width);  // B row-major: row p contiguous
  for (Eigen::Index p = 0; p < k; ++p)
    for (Eigen::Index j = 0; j < n; ++j) b_rows[std::size_t(p) * width + std::size_t(j)] = b(p, j);
  Matrix c(m, n);
#pragma omp parallel num_threads(detail::threads_for_product(m, n, k))
  {
    const ValueRounding& round = nearest(fmt);
    std::vector<double> acc(width), product(width);
#pragma omp for schedule(static)
    for (Eigen::Index i = 0; i < m; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (Eigen::Index p = 0; p < k; ++p) {
        const double x = a(i, p);
        const double* row = b_rows.data() + std::size_t(p) * width;
        for (std::size_t j = 0; j < width; ++j) product[j] = x * row[j];
        round(product, product);
        for (std::size_t j = 0; j < width; ++j) acc[j] += product[j];
        round(acc, acc);
      }
      for (Eigen::Index j = 0; j < n; ++j) c(i, j) = acc[std::size_t(j)];
    }
  }
  return c;
}

// The model with its stochastic-rounding seed mixed with `random`.
sim::AccumulationModel reseeded(const sim::AccumulationModel& model, RandomStream random) {
  if (random.seed == 0 && random.stream == 0) return model;
  sim::AccumulationModel::Variant v = model.variant();
  std::visit(
      [&](auto& m) {
        if constexpr (requires { m.acc.seed; }) {
          if (m.acc.rounding == RoundingMode::stochastic)
            m.acc.seed = counter_random(m.acc.seed, random.seed, random.stream);
        }
      },
      v);
  return sim::AccumulationModel(std::move(v));
}

}  // namespace

namespace {
// A relaxed load per matmul when no counter is alive.
std::atomic<bool> counting{false};
std::atomic<std::int64_t> counted{0};

void count_multiply_adds(Eigen::Index m, Eigen::Index k, Eigen::Index n) {
  if (counting.load(std::memory_order_relaxed))
    counted.fetch_add(std::int64_t(m) * k * n, std::memory_order_relaxed);
}
}  // namespace

CountMultiplyAdds::CountMultiplyAdds() {
  counted = 0;
  counting = true;
}
CountMultiplyAdds::~CountMultiplyAdds() {
  counting = false;
}
double CountMultiplyAdds::count() const {
  return double(counted.load());
}

namespace {

// matmul with operand `t` given transposed: the native kernels read it in
// place, every other path gets the transpose as a matrix (as before).
Matrix matmul_given(const Matrix& a, const Matrix& b, const sim::AccumulationModel& model,
                    RandomStream random, sim::native::Transposed t, bool short_values = false) {
  using sim::native::Transposed;
  const Eigen::Index inner_a = t == Transposed::a ? a.rows() : a.cols();
  const Eigen::Index inner_b = t == Transposed::b ? b.cols() : b.rows();
  if (inner_a != inner_b)
    throw std::invalid_argument("matmul: inner dimensions differ (" + std::to_string(inner_a) + " vs " +
                                std::to_string(inner_b) + ")");
  if (const Format* acc = sequential_rne(model)) {
    if (*acc == formats::binary32()) {
      if (auto c = sim::native::matmul_binary32(a, b, t, 0, short_values)) return std::move(*c);
    } else if (*acc == formats::binary64()) {
      return sim::native::matmul_binary64(a, b, t);
    }
  }
  if (t == Transposed::a) return matmul_given(sim::transposed(a), b, model, random, Transposed::none);
  if (t == Transposed::b) return matmul_given(a, sim::transposed(b), model, random, Transposed::none);
  if (const Format* acc = sequential_rne(model))
    if (*acc != formats::binary32() && *acc != formats::binary64() && grid_accumulator(*acc) &&
        all_binary32(a) && all_binary32(b))
      return matmul_grid(a, b, *acc);
  const sim::GemmOptions options{detail::threads_for_product(a.rows(), b.cols(), a.cols())};
  // A Tensor Core instruction or a kernel schedule over one reads values of
  // its input format (a schedule: the format A and B are stored in, binary32
  // for tf32, which it converts itself): the operands are cast to it, as a
  // framework casts before calling the kernel.
  const auto& v = model.variant();
  if (std::holds_alternative<sim::KernelSchedule>(v) || std::holds_alternative<sim::KernelPreset>(v))
    // The cast in front of the instruction rounds to nearest, whatever the
    // policy's tensor rounding (the hardware's conversion).
    return sim::gemm(model, rounded(model.input_format(), a, RoundingMode::nearest_even),
                     rounded(model.input_format(), b, RoundingMode::nearest_even), options);
  return sim::gemm(reseeded(model, random), a, b, options);
}

}  // namespace

// Each public entry counts its multiply-adds once (CountMultiplyAdds, the run
// plan's test); matmul_given's own fallbacks do not count again.
Matrix matmul(const Matrix& a, const Matrix& b, const sim::AccumulationModel& model, RandomStream random,
              bool short_values) {
  count_multiply_adds(a.rows(), a.cols(), b.cols());
  return matmul_given(a, b, model, random, sim::native::Transposed::none, short_values);
}

Matrix matmul_tn(const Matrix& a, const Matrix& b, const sim::AccumulationModel& model, RandomStream random,
                 bool short_values) {
  count_multiply_adds(a.cols(), a.rows(), b.cols());
  return matmul_given(a, b, model, random, sim::native::Transposed::a, short_values);
}

Matrix matmul_nt(const Matrix& a, const Matrix& b, const sim::AccumulationModel& model, RandomStream random,
                 bool short_values) {
  count_multiply_adds(a.rows(), a.cols(), b.rows());
  return matmul_given(a, b, model, random, sim::native::Transposed::b, short_values);
}

bool short_format(const Format& fmt) {
  return !fmt.is_fixed_point() && fmt.precision() <= 12 && fmt.max_finite() < 0x1p63 &&
         fmt.min_positive() >= 0x1p-62;
}

double sequential_sum(const Format& fmt, const double* values, Eigen::Index count, Eigen::Index stride) {
  if (count == 0) return 0.0;
  double acc = values[0];
  // binary64: nothing to round. binary32 with binary32 terms: binary32
  // additions, each the exact sum rounded once, which is what rounding the
  // binary64 sum gives (double rounding is innocuous for + when 53 >= 2 * 24
  // + 2: Figueroa 1995), at one float add of latency per term (the sums of
  // squares of clip_grad_norm run over every parameter). Other binary32
  // terms: round(acc + v) as float(acc + v).
  if (fmt == formats::binary64()) {
    for (Eigen::Index i = 1; i < count; ++i) acc += values[i * stride];
  } else if (fmt == formats::binary32()) {
    bool terms_binary32 = double(float(acc)) == acc;
    for (Eigen::Index i = 1; i < count; ++i)
      terms_binary32 &= double(float(values[i * stride])) == values[i * stride];
    if (terms_binary32) {
      float f = float(acc);
      for (Eigen::Index i = 1; i < count; ++i) f += float(values[i * stride]);
      return double(f);
    }
    for (Eigen::Index i = 1; i < count; ++i) acc = double(float(acc + values[i * stride]));
  } else {
    const ValueRounding& round = nearest(fmt);
    for (Eigen::Index i = 1; i < count; ++i) acc = round(acc + values[i * stride]);
  }
  return acc;
}

}  // namespace rpsim::sim::train
