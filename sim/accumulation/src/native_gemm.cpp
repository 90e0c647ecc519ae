// The native GEMMs, register-blocked: micro-tiles of 8 rows (AVX-512; 4
// with 16 vector registers) by two vectors of columns of C held in vector registers over the whole K loop, so
// each c(i, j) still sees its K terms in index order, one product and one addition each in the element type
// (every library is built with -ffp-contract=off, so acc + a*b never fuses, whatever the target). The vector
// width (SSE2, AVX2 or AVX-512, chosen once at load time) changes how many c(i, j) advance at once, never the
// operations on one, so the result is the same bits on every x86-64. Packing converts the operands to the
// element type and checks that the conversion loses nothing.
//
// Fused tiles: where every product of two operands is exact in binary32,
// fma(a, b, acc) = round(a * b + acc) = round(round(a * b) + acc), so the
// FMA instruction gives the bits of the product-then-sum above in one
// operation instead of two. A product is exact when both factors have at
// most 12 significant bits (the product has at most 24) and lie in [2^-62,
// 2^63) or are zero (the product is then a normal binary32 number, no
// underflow or overflow): every value of binary16, e4m3 and e5m2, and
// bfloat16's in that range -- what an fp16/fp8 policy casts the operands
// to. The packing checks it with the binary32 check; any other value keeps
// the two-operation tiles.
#include "rpsim/accumulation/native_gemm.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "native_pack.hpp"
#include "rpsim/formats/cpu_features.hpp"

namespace rpsim::sim::native {
namespace {

// Rows of a micro-tile: 8 in AVX-512's 32 registers (16 accumulators), 4
// in AVX2's and SSE2's 16. Eight rows against four, AVX-512, one thread:
// the short-K products a ResNet-style step is made of went 1.5-1.8x faster
// (binary32, 8192x16x144 1.8-2.1 -> 1.4-1.5 ms, 2048x32x288 0.85 -> 0.47-0.56
// ms; binary64 8192x27x16 0.33 -> 0.19 ms), each tile writing whole cache
// lines of a column of C and loading each panel row for twice the rows; no
// shape measured was slower (2026-12-02).
constexpr Eigen::Index kWideRows = 8, kNarrowRows = 4;
constexpr Eigen::Index kParallelWork = 1 << 18;  // m * n * k from which all_tiles uses the threads

// scan_binary32 (native_gemm.hpp): a loop of its own over each stretch
// before it is packed, in the widest vectors this CPU has: the double ->
// float -> double round trip does not vectorise in SSE2, and a check per
// element inside the packing loops kept them scalar (the transposed ones
// were 5-6% of a ResNet-style step). Short: fusable, above.
[[gnu::always_inline]] inline int all_binary32(const double* x, Eigen::Index n) {
  int bad = 0, wide = 0, nan = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    const float f = float(x[i]);
    nan |= x[i] != x[i];
    bad |= (double(f) != x[i]) & (x[i] == x[i]);
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const std::uint32_t magnitude = u & 0x7fffffffu;
    // Biased exponents 65..189 are [2^-62, 2^63); the low 12 of the 23
    // fraction bits are zero for 12 significant bits or fewer.
    wide |= (magnitude != 0) & (((u & 0xfffu) != 0) | (((magnitude >> 23) - 65u) > 124u));
  }
  return bad * kNotBinary32 | wide * kNotShort | nan * kNaN;
}
__attribute__((target("avx512f"))) int all_binary32_avx512(const double* x, Eigen::Index n) {
  return all_binary32(x, n);
}
__attribute__((target("avx2"))) int all_binary32_avx2(const double* x, Eigen::Index n) {
  return all_binary32(x, n);
}
int all_binary32_sse2(const double* x, Eigen::Index n) {
  return all_binary32(x, n);
}

}  // namespace

int scan_binary32(const double* x, Eigen::Index n) {
  static const auto check = [] {
    if (cpu_features().avx512f) return &all_binary32_avx512;
    if (cpu_features().avx2) return &all_binary32_avx2;
    return &all_binary32_sse2;
  }();
  return check(x, n);
}

namespace {

// Whether the n values from x can be packed in T without rounding (binary64:
// always); `fusable` is cleared when one of them is not short. The packings
// check each contiguous stretch just before they convert it, while it is in
// cache: a pass over a whole operand first was one more trip through memory
// (3.5% of a ResNet-18 step).
// `vouched`: the caller knows every entry is a short binary32 value or
// infinite or NaN (operands it rounded to binary16 itself): no scan. An
// infinite or NaN operand makes the same product either way (an infinite
// product is exact); only a NaN's payload may differ.
template <class T>
bool packable(const double* x, Eigen::Index n, bool& fusable, bool vouched) {
  if constexpr (std::is_same_v<T, double>) {
    fusable = false;
    return true;
  } else {
    if (vouched) return true;
    const int found = scan_binary32(x, n);
    if (found & kNotShort) fusable = false;
    return !(found & kNotBinary32);
  }
}

// A packing buffer (matmul_native's, kept between calls) of at least n
// entries, grown and never shrunk: resize() to a call's size zero-filled,
// after a smaller call, all it had given up (a memset of most of a layer's
// operand per GEMM, 2.9% of a ResNet-style step with the shadow).
template <class T>
void grow(std::vector<T>& out, Eigen::Index n) {
  if (out.size() < std::size_t(n)) out.resize(std::size_t(n));
}

// A in blocks of `height` rows (the kernel's tile rows), each stored
// p-major: block[p * height + r] = a(i0 + r, p); rows past the end are zero. With kTransposed the matrix
// given is A^T (backward's x^T and w^T, read in place instead of copied out
// first: that copy was half of Linear::core_backward's own time). False,
// packing stopped, when an entry is not a value of T.
template <class T, bool kTransposed>
bool pack_a(const Matrix& given, Eigen::Index height, std::vector<T>& out, bool& fusable, bool vouched) {
  const Eigen::Index m = kTransposed ? given.cols() : given.rows(),
                     k = kTransposed ? given.rows() : given.cols();
  const Eigen::Index blocks = (m + height - 1) / height;
  grow(out, blocks * height * k);
  // Only the last block can be short: its missing rows are zero.
  if (m % height) std::fill_n(out.data() + (blocks - 1) * height * k, height * k, T(0));
  if constexpr (kTransposed) {
    // Row i of A is column i of A^T, contiguous: each of a block's rows is
    // one run into every height-th slot.
    for (Eigen::Index blk = 0; blk < blocks; ++blk) {
      T* dst = out.data() + blk * height * k;
      const Eigen::Index rows = std::min(height, m - blk * height);
      if (!packable<T>(column_at(given, 0, blk * height), rows * k, fusable, vouched))
        return false;  // the block's columns of A^T
      convert_runs(given, blk * height, rows, dst, k, height);
    }
  } else {
    // A column-major A read kSpan columns at a time down their length, every
    // block taking its height x kSpan square: a few streams through memory. A
    // block's whole row of K, one column each, was k streams at once with a
    // stride of m doubles: packing an im2col operand (8192 x 144) took 3.5x
    // the tiles' own time.
    constexpr Eigen::Index kSpan = 8;
    for (Eigen::Index p0 = 0; p0 < k; p0 += kSpan) {
      const Eigen::Index p1 = std::min(k, p0 + kSpan);
      if (!packable<T>(column_at(given, 0, p0), m * (p1 - p0), fusable, vouched))
        return false;  // the span's columns
      for (Eigen::Index blk = 0; blk < blocks; ++blk) {
        T* dst = out.data() + blk * height * k;
        const Eigen::Index rows = std::min(height, m - blk * height);
        for (Eigen::Index p = p0; p < p1; ++p)
          convert_run(column_at(given, blk * height, p), dst + p * height, rows, 1);
      }
    }
  }
  return true;
}

// B in panels of `width` columns, each stored p-major: panel[p * width + c]
// = b(p, j0 + c); columns past the end are zero. kTransposed: `given` is B^T.
// False, packing stopped, when an entry is not a value of T.
template <class T, bool kTransposed>
bool pack_b(const Matrix& given, Eigen::Index width, std::vector<T>& out, bool& fusable, bool vouched) {
  // B^T's panels are rows of it, not contiguous: checked whole, first.
  if (kTransposed && !packable<T>(given.data(), given.size(), fusable, vouched)) return false;
  const Eigen::Index k = kTransposed ? given.cols() : given.rows(),
                     n = kTransposed ? given.rows() : given.cols();
  const Eigen::Index panels = (n + width - 1) / width;
  grow(out, panels * width * k);
  for (Eigen::Index pan = 0; pan < panels; ++pan) {
    T* dst = out.data() + pan * width * k;
    const Eigen::Index cols = std::min(width, n - pan * width);
    if (cols < width) std::fill(dst, dst + width * k, T(0));
    if constexpr (kTransposed) {  // row p of the panel is a contiguous run of B^T's column p
      for (Eigen::Index p = 0; p < k; ++p)
        convert_run(column_at(given, pan * width, p), dst + p * width, cols, 1);
    } else {
      if (!packable<T>(column_at(given, 0, pan * width), k * cols, fusable, vouched))
        return false;  // the panel's columns
      convert_runs(given, pan * width, cols, dst, k, width);
    }
  }
  return true;
}

// One micro-tile of kRows x 2 vectors of kBytes: tile[r * width + c] = sum
// over p in order of a(r, p) * b(p, c), width = 2 * kBytes / sizeof(T).
// (No function takes or returns a vector: that would change the ABI by target.)
template <class T, int kBytes, Eigen::Index kRows>
[[gnu::always_inline]] inline void micro_tile(const T* a, const T* b, Eigen::Index k, T* tile) {
  typedef T Vec __attribute__((vector_size(kBytes)));
  constexpr Eigen::Index lanes = kBytes / sizeof(T), width = 2 * lanes;
  Vec acc[kRows][2] = {};
  for (Eigen::Index p = 0; p < k; ++p) {
    Vec b0, b1;
    std::memcpy(&b0, b + p * width, sizeof b0);
    std::memcpy(&b1, b + p * width + lanes, sizeof b1);
    for (Eigen::Index r = 0; r < kRows; ++r) {
      const T x = a[p * kRows + r];
      acc[r][0] = acc[r][0] + x * b0;
      acc[r][1] = acc[r][1] + x * b1;
    }
  }
  for (Eigen::Index r = 0; r < kRows; ++r) {
    std::memcpy(tile + r * width, &acc[r][0], sizeof(Vec));
    std::memcpy(tile + r * width + lanes, &acc[r][1], sizeof(Vec));
  }
}

template <class T>
__attribute__((target("avx512f"))) void tile_avx512(const T* a, const T* b, Eigen::Index k, T* tile) {
  micro_tile<T, 64, kWideRows>(a, b, k, tile);
}
template <class T>
__attribute__((target("avx2"))) void tile_avx2(const T* a, const T* b, Eigen::Index k, T* tile) {
  micro_tile<T, 32, kNarrowRows>(a, b, k, tile);
}
template <class T>
void tile_sse2(const T* a, const T* b, Eigen::Index k, T* tile) {
  micro_tile<T, 16, kNarrowRows>(a, b, k, tile);
}

// micro_tile's binary32 tile with one FMA per term (fused tiles, above: the
// same bits where every product is exact), in the target's intrinsics. A
// macro, not a template: no function may take or return a vector (micro_tile's
// note), and the intrinsics only inline into a function of their target.
#define RPSIM_FUSED_TILE(name, isa, V, lanes, kRows, zero, load, broadcast, fma, store)                 \
  __attribute__((target(isa))) void name(const float* a, const float* b, Eigen::Index k, float* tile) { \
    constexpr Eigen::Index width = 2 * (lanes);                                                         \
    V acc[kRows][2];                                                                                    \
    for (auto& row : acc) row[0] = row[1] = zero();                                                     \
    for (Eigen::Index p = 0; p < k; ++p) {                                                              \
      const V b0 = load(b + p * width), b1 = load(b + p * width + (lanes));                             \
      for (Eigen::Index r = 0; r < kRows; ++r) {                                                        \
        const V x = broadcast(a[p * kRows + r]);                                                        \
        acc[r][0] = fma(x, b0, acc[r][0]);                                                              \
        acc[r][1] = fma(x, b1, acc[r][1]);                                                              \
      }                                                                                                 \
    }                                                                                                   \
    for (Eigen::Index r = 0; r < kRows; ++r) {                                                          \
      store(tile + r * width, acc[r][0]);                                                               \
      store(tile + r * width + (lanes), acc[r][1]);                                                     \
    }                                                                                                   \
  }
RPSIM_FUSED_TILE(fused_avx512, "avx512f", __m512, 16, kWideRows, _mm512_setzero_ps, _mm512_loadu_ps,
                 _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)
RPSIM_FUSED_TILE(fused_avx2, "avx2,fma", __m256, 8, kNarrowRows, _mm256_setzero_ps, _mm256_loadu_ps,
                 _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)
#undef RPSIM_FUSED_TILE

// The widest kernel this CPU runs, its tile rows (A's block height), its
// panel width, and (binary32 on a CPU with FMA) its fused tiles of the same shape.
template <class T>
struct Kernel {
  void (*tile)(const T*, const T*, Eigen::Index, T*);
  Eigen::Index rows, width;
  void (*fused)(const T*, const T*, Eigen::Index, T*) = nullptr;
};

template <class T>
Kernel<T> kernel() {
  constexpr Eigen::Index per_16_bytes = 16 / sizeof(T);
  constexpr bool binary32 = std::is_same_v<T, float>;
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512f) {
    if constexpr (binary32) return {&tile_avx512<T>, kWideRows, 8 * per_16_bytes, &fused_avx512};
    return {&tile_avx512<T>, kWideRows, 8 * per_16_bytes};
  }
  if (cpu.avx2) {
    if constexpr (binary32)
      if (cpu.fma) return {&tile_avx2<T>, kNarrowRows, 4 * per_16_bytes, &fused_avx2};
    return {&tile_avx2<T>, kNarrowRows, 4 * per_16_bytes};
  }
  return {&tile_sse2<T>, kNarrowRows, 2 * per_16_bytes};
}

// Every tile, panel by panel (a panel of B stays in cache while the blocks
// of A stream past it). kSwapped: the packings hold B^T (blocks) and A^T
// (panels), so the tiles are of C^T, each of whose rows is a stretch of one
// column of C.
template <class T, bool kSwapped>
void all_tiles(const Kernel<T>& kern, const std::vector<T>& ap, const std::vector<T>& bp, Eigen::Index k,
               Matrix& c, int threads, bool fused) {
  const Eigen::Index m = kSwapped ? c.cols() : c.rows(), n = kSwapped ? c.rows() : c.cols(),
                     width = kern.width, height = kern.rows;
  const auto tile_of = fused && kern.fused ? kern.fused : kern.tile;
  const Eigen::Index blocks = (m + height - 1) / height, panels = (n + width - 1) / width;
  // Small products (attention's per-head ones) on one thread: starting the
  // team cost more than the product (a small GPT's run took 13% longer in
  // wall time and twice the CPU with 2 threads). The result is the same.
  const bool parallel = double(m) * double(n) * double(k) >= double(kParallelWork);
#pragma omp parallel for schedule(static) collapse(2) if (parallel) \
    num_threads(threads > 0 ? threads : omp_get_max_threads())
  for (Eigen::Index pan = 0; pan < panels; ++pan)
    for (Eigen::Index blk = 0; blk < blocks; ++blk) {
      alignas(64) T tile[kWideRows * 128 / sizeof(T)];
      tile_of(ap.data() + blk * height * k, bp.data() + pan * width * k, k, tile);
      const Eigen::Index rows = std::min(height, m - blk * height), cols = std::min(width, n - pan * width);
      if constexpr (kSwapped) {
        for (Eigen::Index r = 0; r < rows; ++r) {
          double* out = &c(pan * width, blk * height + r);
          for (Eigen::Index col = 0; col < cols; ++col) out[col] = double(tile[r * width + col]);
        }
      } else {
        for (Eigen::Index col = 0; col < cols; ++col)
          for (Eigen::Index r = 0; r < rows; ++r)
            c(blk * height + r, pan * width + col) = double(tile[r * width + col]);
      }
    }
}

// Whether C = A B (m x n, depth k) goes faster as C^T = B^T A^T. Tiles are
// rows x width: a short side pads a tile out (conv2d's 16 output channels
// filled half of each 32-wide AVX-512 panel), and the tiles of C^T are
// written to C a contiguous stretch at a time where C's are written across
// its columns (which dominates at a short K: conv2d's input gradient, K = 16).
// Swapped only for a clear gain (a fifth, in this count), and never for A^T
// given (the weight gradient A^T dY; matmul_native asks only without it): A's
// panels would then be packed from A^T's columns with a stride per element,
// slower than the tiles saved (a ResNet-style conv's weight gradient took
// 10-20% longer). Either way each
// c(i, j) is the same sum in the same order of the same products (a * b =
// b * a), so the bits are the same.
inline bool swap_roles(Eigen::Index m, Eigen::Index n, Eigen::Index k, Eigen::Index rows,
                       Eigen::Index width) {
  const auto up = [](Eigen::Index x, Eigen::Index to) { return double((x + to - 1) / to * to); };
  const double mn = double(m) * double(n);
  const double as_given = up(m, rows) * up(n, width) * double(k) + 3 * mn;
  const double swapped = up(n, rows) * up(m, width) * double(k) + mn;
  return swapped < 0.8 * as_given;
}

template <class T, bool kTa, bool kTb>
std::optional<Matrix> matmul_native(const Matrix& a, const Matrix& b, int threads, bool vouched) {
  static const Kernel<T> kern = kernel<T>();
  // Thread-local packing buffers, kept between calls: a fresh vector per
  // call was zero-filled by assign() and often faulted in again.
  thread_local std::vector<T> ap, bp;
  const Eigen::Index m = kTa ? a.cols() : a.rows(), n = kTb ? b.rows() : b.cols(),
                     k = kTa ? a.rows() : a.cols();
  bool fused = true;  // cleared by the packings at a value whose products may round
  if constexpr (!kTa) {
    if (swap_roles(m, n, k, kern.rows, kern.width)) {
      // B^T in blocks (given B: its transpose), A^T (given A: its transpose) in panels.
      if (!pack_a<T, !kTb>(b, kern.rows, ap, fused, vouched) ||
          !pack_b<T, true>(a, kern.width, bp, fused, vouched))
        return std::nullopt;
      Matrix c(m, n);
      all_tiles<T, true>(kern, ap, bp, k, c, threads, fused);
      return c;
    }
  }
  if (!pack_a<T, kTa>(a, kern.rows, ap, fused, vouched) || !pack_b<T, kTb>(b, kern.width, bp, fused, vouched))
    return std::nullopt;
  Matrix c(m, n);
  all_tiles<T, false>(kern, ap, bp, k, c, threads, fused);
  return c;
}

template <class T>
std::optional<Matrix> matmul_native(const Matrix& a, const Matrix& b, Transposed t, int threads,
                                    bool vouched) {
  if (t == Transposed::a) return matmul_native<T, true, false>(a, b, threads, vouched);
  if (t == Transposed::b) return matmul_native<T, false, true>(a, b, threads, vouched);
  return matmul_native<T, false, false>(a, b, threads, vouched);
}

}  // namespace

std::optional<Matrix> matmul_binary32(const Matrix& a, const Matrix& b, Transposed t, int threads,
                                      bool short_values) {
  return matmul_native<float>(a, b, t, threads, short_values);
}

Matrix matmul_binary64(const Matrix& a, const Matrix& b, Transposed t, int threads) {
  return *matmul_native<double>(a, b, t, threads, false);
}

}  // namespace rpsim::sim::native
