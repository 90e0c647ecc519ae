// Unscaling, the gradient norm and clipping (step_ops.hpp).
#include "rpsim/train/step_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "../count_where.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {
namespace {

// Elements a chunk: the products are rounded by the array kernel (the vector
// path of ValueRounding, the bits of its one-value call) from a buffer on the
// stack, where a call per element kept the loop scalar (unscale was 3.7% of an
// MLP step), and a binary32 carrier is read and written in the same pass (a
// binary64 copy of every gradient cost more in page faults than in work).
constexpr std::size_t kChunk = 512;

// x[0, n) as doubles: x itself, or a float carrier widened into buf (kChunk
// entries at most: count_where's compares are on doubles).
inline const double* widened(const double* x, std::size_t, double*) {
  return x;
}
inline const double* widened(const float* x, std::size_t n, double* buf) {
  for (std::size_t i = 0; i < n; ++i) buf[i] = double(x[i]);
  return buf;
}

// Whether v is inf or NaN (v - v is 0 exactly for the finite), on GCC vector
// pairs and scalars alike.
constexpr auto not_finite = [](auto v) { return (v - v) != 0; };

// Entries of x[0, n) that are inf or NaN.
std::int64_t nonfinite_count(const double* x, std::size_t n) {
  return detail::count_where(Eigen::Index(n), not_finite, x);
}

// The entries where pred(x[i], y[i], ...) holds, with a binary32 carrier
// compared as it is (widening is exact, so every comparison has the same
// outcome): a 32-bit count per stretch, which GCC vectorises, where the
// widening into binary64 chunks for count_where took 4-5x as long (count_stalled
// of an MLP's binary32 weights 237 -> 49 us; count_zero_vs of binary32
// against binary64 200 -> 103 us; 2026-12-02, Zen 5). Not for binary64
// alone: there count_where's pairs are faster (a 65,536-entry count_stalled
// 60-87 against 129 us, count_zero_vs 82-88 against 182 us; 2026-12-02,
// Xeon, SSE2 baseline). Each predicate is one generic lambda for both: on
// GCC vector pairs (count_where) and on scalars of either width (the
// literal 0 converts to each operand's own type; the same timings).
template <class Pred, class... T>
std::int64_t count_direct(std::size_t size, Pred pred, const T*... x) {
  constexpr std::size_t kStretch = 4096;
  std::int64_t count = 0;
  for (std::size_t i0 = 0; i0 < size; i0 += kStretch) {
    const std::size_t i1 = std::min(size, i0 + kStretch);
    std::int32_t c = 0;
    for (std::size_t i = i0; i < i1; ++i) c += pred(x[i]...);
    count += c;
  }
  return count;
}

// g * factor rounded to f (nearest even), in place: the flushed entries, and
// whether a result is not finite. The counts are count_where's vector
// compares: a scalar loop that counted, checked and stored in one pass was
// 70% of unscale's time.
template <class T>
Unscaled multiply(std::span<T> g, double factor, const Format& f, std::span<bool> mask) {
  const ValueRounding& r = nearest_rounding(f);
  Unscaled u;
  std::int64_t nonfinite = 0;
  double before[kChunk], x[kChunk];
  for (std::size_t i0 = 0; i0 < g.size(); i0 += kChunk) {
    const std::size_t n = std::min(kChunk, g.size() - i0);
    T* p = g.data() + i0;
    for (std::size_t i = 0; i < n; ++i) {
      before[i] = double(p[i]);
      x[i] = before[i] * factor;
    }
    r(std::span<const double>(x, n), std::span<double>(x, n));
    u.flushed += detail::count_where(
        Eigen::Index(n), [](auto a, auto b) { return (a != 0) & (b == 0); }, before, x);
    nonfinite += nonfinite_count(x, n);
    for (std::size_t i = 0; i < n; ++i) p[i] = T(x[i]);
    if (!mask.empty())
      for (std::size_t i = 0; i < n; ++i) mask[i0 + i] = (before[i] != 0) & (x[i] == 0);
  }
  u.nonfinite = nonfinite > 0;
  return u;
}

// multiply() on a binary32 carrier rounded to binary32 by a factor binary32
// holds: the product of two binary32 values is exact in binary64 (48 <= 53
// significant bits), so rounding it once to binary32 is float's own multiply
// (IEEE 754 clause 4.3: the same rounding of the same exact product, gradual
// underflow and overflow alike). One pass, no binary64 buffer (unscale was
// 3.6% of an MLP step).
// The mask, where asked for, in a loop of its own: the one above vectorises
// (a store to bool in it did not).
Unscaled multiply_binary32(std::span<float> g, float factor, std::span<bool> mask) {
  std::int64_t flushed = 0, nonfinite = 0;
  float* p = g.data();
  const auto flushing = [factor](float before) { return (before != 0.0f) & (before * factor == 0.0f); };
  if (!mask.empty())
    for (std::size_t i = 0; i < g.size(); ++i) mask[i] = flushing(p[i]);
  // 32-bit counts per stretch, lanes as wide as the floats' (64-bit ones
  // unpacked every compare: 0.65 ns an entry).
  constexpr std::size_t kStretch = 4096;
  for (std::size_t i0 = 0; i0 < g.size(); i0 += kStretch) {
    const std::size_t i1 = std::min(g.size(), i0 + kStretch);
    std::int32_t f = 0, nf = 0;
    for (std::size_t i = i0; i < i1; ++i) {
      const float before = p[i], x = before * factor;
      f += int(before != 0.0f) & int(x == 0.0f);
      nf += int((x - x) != 0.0f);  // inf - inf and NaN are NaN
      p[i] = x;
    }
    flushed += f;
    nonfinite += nf;
  }
  return Unscaled{flushed, nonfinite > 0};
}

template <class T>
Unscaled unscale_carrier(std::span<T> g, double inv, const Format& gradients, std::span<bool> mask) {
  if (!mask.empty() && mask.size() != g.size())
    throw std::invalid_argument("unscale: the flushed mask's size differs from the gradient's");
  if constexpr (std::is_same_v<T, float>)
    if (inv != 1.0 && gradients == formats::binary32() && double(float(inv)) == inv)
      return multiply_binary32(g, float(inv), mask);
  if (inv != 1.0) return multiply(g, inv, gradients, mask);
  std::fill(mask.begin(), mask.end(), false);  // a factor of 1 flushes nothing
  Unscaled u;
  u.nonfinite = count_nonfinite(std::span<const T>(g)) > 0;
  return u;
}

}  // namespace

namespace {

template <class T>
std::int64_t nonfinite_entries(std::span<const T> x) {
  if constexpr (std::is_same_v<T, float>)  // (a ResNet-style step's gradients: 1.6% of it widened)
    return count_direct(x.size(), not_finite, x.data());
  std::int64_t n = 0;
  double buf[kChunk];
  for (std::size_t i0 = 0; i0 < x.size(); i0 += kChunk) {
    const std::size_t len = std::min(kChunk, x.size() - i0);
    n += nonfinite_count(widened(x.data() + i0, len, buf), len);
  }
  return n;
}

}  // namespace

std::int64_t count_nonfinite(std::span<const double> x) {
  return nonfinite_entries(x);
}

std::int64_t count_nonfinite(std::span<const float> x) {
  return nonfinite_entries(x);
}

template <class E, class R>
std::int64_t count_zero_vs(std::span<const E> emulated, std::span<const R> reference) {
  if (emulated.size() != reference.size())
    throw std::invalid_argument("count_zero_vs: the emulated and reference arrays differ in size");
  const auto zero_vs = [](auto e, auto r) { return (e == 0) & (r != 0) & (r - r == 0); };
  if constexpr (!std::is_same_v<E, double> || !std::is_same_v<R, double>)
    return count_direct(emulated.size(), zero_vs, emulated.data(), reference.data());
  std::int64_t n = 0;
  double e[kChunk], r[kChunk];
  for (std::size_t i0 = 0; i0 < emulated.size(); i0 += kChunk) {
    const std::size_t len = std::min(kChunk, emulated.size() - i0);
    n += detail::count_where(Eigen::Index(len), zero_vs, widened(emulated.data() + i0, len, e),
                             widened(reference.data() + i0, len, r));
  }
  return n;
}

template std::int64_t count_zero_vs(std::span<const double>, std::span<const double>);
template std::int64_t count_zero_vs(std::span<const float>, std::span<const double>);
template std::int64_t count_zero_vs(std::span<const double>, std::span<const float>);
template std::int64_t count_zero_vs(std::span<const float>, std::span<const float>);

template <class G, class W>
std::int64_t count_stalled(std::span<const G> grad, std::span<const W> next, std::span<const W> value) {
  if (grad.size() != next.size() || next.size() != value.size())
    throw std::invalid_argument("count_stalled: the gradient and the weights differ in size");
  const auto stalled = [](auto g, auto n, auto w) { return (g != 0) & (n == w); };
  if constexpr (!std::is_same_v<G, double> || !std::is_same_v<W, double>)
    return count_direct(grad.size(), stalled, grad.data(), next.data(), value.data());
  std::int64_t count = 0;
  double g[kChunk], n[kChunk], w[kChunk];
  for (std::size_t i0 = 0; i0 < grad.size(); i0 += kChunk) {
    const std::size_t len = std::min(kChunk, grad.size() - i0);
    count += detail::count_where(Eigen::Index(len), stalled, widened(grad.data() + i0, len, g),
                                 widened(next.data() + i0, len, n), widened(value.data() + i0, len, w));
  }
  return count;
}

template std::int64_t count_stalled(std::span<const double>, std::span<const double>,
                                    std::span<const double>);
template std::int64_t count_stalled(std::span<const float>, std::span<const float>, std::span<const float>);
template std::int64_t count_stalled(std::span<const float>, std::span<const double>, std::span<const double>);
template std::int64_t count_stalled(std::span<const double>, std::span<const float>, std::span<const float>);

double unscale_factor(double scale) {
  return round_value(formats::binary32(), 1.0 / scale);
}

Unscaled unscale(std::span<double> g, double inv, const Format& gradients, std::span<bool> flushed) {
  return unscale_carrier(g, inv, gradients, flushed);
}

Unscaled unscale(std::span<float> g, double inv, const Format& gradients, std::span<bool> flushed) {
  return unscale_carrier(g, inv, gradients, flushed);
}

const Format& norm_format(const PrecisionPolicy& policy) {
  return formats::binary32().bits <= policy.optimizer_compute->bits ? *policy.optimizer_compute
                                                                    : formats::binary32();
}

double grad_norm(const std::vector<std::span<const double>>& grads, const Format& c) {
  GradNorm norm(c);
  for (const std::span<const double> g : grads) norm.add(g);
  return norm.value();
}

// A tensor's squares, each rounded to c, summed in order with one rounding
// per addition, in chunks: the running sum is the first term of the next
// chunk's sequential sum, which is the whole tensor's sequential sum.
template <class T>
void GradNorm::add_tensor(std::span<const T> g) {
  const ValueRounding& r = nearest_rounding(*c_);
  if constexpr (std::is_same_v<T, float>) {
    if (*c_ == formats::binary32()) {
      // Below on a binary32 carrier summed in binary32: a square is float's
      // own multiply (the exact binary64 square rounded once, as
      // multiply_binary32), and the chunks' sums one float chain in order
      // (sequential_sum's binary32 path): no squares buffer and no pass to
      // check them (the norm was 4% of an MLP step; the chain's latency stays).
      float s = 0.0f;  // (0 + the first square is that square: sequential_sum's start)
      for (const float x : g) s += x * x;
      total_ = r(total_ + double(s));
      return;
    }
  }
  double sq[kChunk + 1];
  double s = 0;
  for (std::size_t i0 = 0; i0 < g.size(); i0 += kChunk) {
    const std::size_t n = std::min(kChunk, g.size() - i0);
    for (std::size_t i = 0; i < n; ++i) sq[i + 1] = double(g[i0 + i]) * double(g[i0 + i]);
    r(std::span<const double>(sq + 1, n), std::span<double>(sq + 1, n));
    if (i0 == 0) {
      s = sequential_sum(*c_, sq + 1, Eigen::Index(n));
    } else {
      sq[0] = s;
      s = sequential_sum(*c_, sq, Eigen::Index(n + 1));
    }
  }
  total_ = r(total_ + s);
}

void GradNorm::add(std::span<const double> g) {
  add_tensor(g);
}
void GradNorm::add(std::span<const float> g) {
  add_tensor(g);
}

double GradNorm::value() const {
  return nearest_rounding(*c_)(std::sqrt(total_));
}

double clip_coefficient(double max_norm, double norm, const Format& c) {
  return round_value(c, max_norm / round_value(c, norm + 1e-6));
}

std::int64_t scale_gradient(std::span<double> g, double coef, const Format& gradients) {
  return multiply(g, coef, gradients, {}).flushed;
}

std::int64_t accumulate_gradient(std::span<double> sum, std::span<const double> g, const Format& f,
                                 bool first) {
  std::vector<double> exact(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) exact[i] = first ? g[i] : sum[i] + g[i];
  nearest_rounding(f)(std::span<const double>(exact), sum);
  std::int64_t flushed = 0;
  for (std::size_t i = 0; i < g.size(); ++i) flushed += exact[i] != 0 && sum[i] == 0;
  return flushed;
}

}  // namespace rpsim::sim::train
