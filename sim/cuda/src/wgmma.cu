// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): one warpgroup (128
// threads) per case, A from registers, B from shared memory through a matrix
// descriptor, the accumulator loaded with C. Every row of A is the case's a and
// every column of B its b, so every element of D is the same dot product (plus
// C at D[0][0]) and a mistake in the M or N layout of a fragment cannot change
// D[0][0]; only the K order matters, and it follows the PTX ISA ("Register
// fragments and shared memory matrix layouts" for wgmma .m64nNk16 and
// .m64nNk32: per warp the A fragment is mma.sync's m16n8k16 / m16n8k32 one).
#include "check.cuh"
#include "operands.cuh"

namespace rpsim::cuda {
namespace {

struct WgmmaKind {
  bool fp8, e4m3, bf16, f16_out;
  int k;  // K of one instruction
};

__device__ WgmmaKind kind_of(Mma op) {
  switch (op) {
    case Mma::wgmma_m64n8k16_f16_f16: return {false, false, false, true, 16};
    case Mma::wgmma_m64n8k16_bf16_f32: return {false, false, true, false, 16};
    case Mma::wgmma_m64n8k32_e4m3_f32: return {true, true, false, false, 32};
    case Mma::wgmma_m64n8k32_e5m2_f32: return {true, false, false, false, 32};
    case Mma::wgmma_m64n8k32_e4m3_f16: return {true, true, false, true, 32};
    case Mma::wgmma_m64n8k32_e5m2_f16: return {true, false, false, true, 32};
    default: return {false, false, false, false, 16};  // wgmma_m64n8k16_f16_f32
  }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // wgmma exists on sm_90a only
// B (N = 8 rows of 32 bytes, K-major) without swizzling: core matrices of 8
// rows x 16 bytes stored row after row, the one holding bytes 16..31 of each
// row 128 bytes after the first.
constexpr int kCoreMatrixBytes = 128;
__device__ int b_offset(int n, int kbyte) {
  return (kbyte / 16) * kCoreMatrixBytes + n * 16 + kbyte % 16;
}

// Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
// start address, leading dimension byte offset (between core matrices along
// K) and stride dimension byte offset (between groups of 8 rows), in 16-byte
// units, no swizzle. With N = 8 there is one group of rows; both offsets are
// 128 so that either reading of them finds the second core matrix.
__device__ std::uint64_t descriptor(const void* smem) {
  const std::uint64_t addr = static_cast<std::uint64_t>(__cvta_generic_to_shared(smem));
  constexpr std::uint64_t lbo = kCoreMatrixBytes, sbo = kCoreMatrixBytes;
  return ((addr >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32;
}

// Writes the instruction's k values of b into every column of B.
__device__ void fill_b(std::uint8_t* tile, const std::uint32_t* b, const WgmmaKind& w) {
  for (int i = int(threadIdx.x); i < 8 * w.k; i += 128) {
    const int n = i / w.k, k = i % w.k;
    if (w.fp8) {
      tile[b_offset(n, k)] = std::uint8_t(fp8_bits(b[k], w.e4m3));
    } else {
      const std::uint32_t h = w.bf16 ? bf16_bits(b[k]) : f16_bits(b[k]);
      tile[b_offset(n, 2 * k)] = std::uint8_t(h);
      tile[b_offset(n, 2 * k + 1)] = std::uint8_t(h >> 8);
    }
  }
}

// A's registers for this thread: rows g and g+8 (both are a), k as mma.sync.
__device__ void fill_a(std::uint32_t A[4], const std::uint32_t* a, const WgmmaKind& w, int t) {
  if (w.fp8) {
    auto x4 = [&](int k) {
      std::uint32_t r = 0;
      for (int i = 0; i < 4; ++i) r |= fp8_bits(a[k + i], w.e4m3) << (8 * i);
      return r;
    };
    A[0] = A[1] = x4(4 * t);
    A[2] = A[3] = x4(4 * t + 16);
  } else {
    auto enc = [&](int k) { return w.bf16 ? bf16_bits(a[k]) : f16_bits(a[k]); };
    A[0] = A[1] = pack2(enc(2 * t), enc(2 * t + 1));
    A[2] = A[3] = pack2(enc(2 * t + 8), enc(2 * t + 9));
  }
}

#define RPSIM_WGMMA_F32(SHAPE_TYPES, TAIL)                                                                \
  asm volatile("wgmma.mma_async.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, " TAIL ";" \
               : "+f"(D[0]), "+f"(D[1]), "+f"(D[2]), "+f"(D[3])                                           \
               : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "l"(desc)                                    \
               : "memory")
#define RPSIM_WGMMA_F16(SHAPE_TYPES, TAIL)                                                          \
  asm volatile("wgmma.mma_async.sync.aligned." SHAPE_TYPES " {%0,%1}, {%2,%3,%4,%5}, %6, " TAIL ";" \
               : "+r"(H[0]), "+r"(H[1])                                                             \
               : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "l"(desc)                              \
               : "memory")
// One instruction, accumulating (scale-d 1), A and B not negated; the 16-bit
// forms also take imm-trans-b (0: B is K-major).
__device__ void issue(Mma op, const std::uint32_t A[4], std::uint64_t desc, float D[4], std::uint32_t H[2]) {
  switch (op) {
    case Mma::wgmma_m64n8k16_f16_f32: RPSIM_WGMMA_F32("m64n8k16.f32.f16.f16", "1, 1, 1, 0"); break;
    case Mma::wgmma_m64n8k16_f16_f16: RPSIM_WGMMA_F16("m64n8k16.f16.f16.f16", "1, 1, 1, 0"); break;
    case Mma::wgmma_m64n8k16_bf16_f32: RPSIM_WGMMA_F32("m64n8k16.f32.bf16.bf16", "1, 1, 1, 0"); break;
    case Mma::wgmma_m64n8k32_e4m3_f32: RPSIM_WGMMA_F32("m64n8k32.f32.e4m3.e4m3", "1, 1, 1"); break;
    case Mma::wgmma_m64n8k32_e5m2_f32: RPSIM_WGMMA_F32("m64n8k32.f32.e5m2.e5m2", "1, 1, 1"); break;
    case Mma::wgmma_m64n8k32_e4m3_f16: RPSIM_WGMMA_F16("m64n8k32.f16.e4m3.e4m3", "1, 1, 1"); break;
    case Mma::wgmma_m64n8k32_e5m2_f16: RPSIM_WGMMA_F16("m64n8k32.f16.e5m2.e5m2", "1, 1, 1"); break;
    default: break;
  }
}
#undef RPSIM_WGMMA_F32
#undef RPSIM_WGMMA_F16

// The chain of instructions over K for one case, D[0][0] starting at C.
__device__ void run_chain(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b, const WgmmaKind& w,
                          float D[4], std::uint32_t H[2]) {
  __shared__ alignas(128) std::uint8_t tile[2 * kCoreMatrixBytes];
  std::uint32_t A[4];
  for (int k0 = 0; k0 < K; k0 += w.k) {
    fill_b(tile, b + k0, w);
    fill_a(A, a + k0, w, int(threadIdx.x % 32) & 3);
    // Shared memory written by the threads is read by the async proxy.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    issue(op, A, descriptor(tile), D, H);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    __syncthreads();  // before the next instruction's B overwrites the tile
  }
}
#endif

__global__ void wgmma_kernel(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b,
                             const std::uint32_t* c, std::uint32_t* d) {
  const std::size_t cs = blockIdx.x;
  const WgmmaKind w = kind_of(op);
  float D[4] = {0.f, 0.f, 0.f, 0.f};
  std::uint32_t H[2] = {0, 0};
  if (threadIdx.x == 0) {  // D[0][0]: thread 0's first accumulator (its low half for f16)
    D[0] = f32(c[cs]);
    H[0] = f16_bits(c[cs]);
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  run_chain(op, K, a + cs * K, b + cs * K, w, D, H);
#else
  // The host never launches this below or above sm_90a.
  (void)K, (void)a, (void)b;
  D[0] = __int_as_float(0x7fffffff);
  H[0] = 0x7fffu;
#endif
  if (threadIdx.x == 0) d[cs] = w.f16_out ? widen_f16(H[0]) : __float_as_uint(D[0]);
}

}  // namespace

void launch_wgmma(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                  std::uint32_t* d, std::size_t cases) {
  wgmma_kernel<<<unsigned(cases), 128>>>(op, K, a, b, c, d);
}

}  // namespace rpsim::cuda
