// One warp per case: row 0 of A is the case's a, column 0 of B its b, C[0][0]
// its c; every other element is zero, so D[0][0] is exactly the dot product
// the tensor core computes for that row and column. Fragment layouts follow
// the PTX ISA, "Matrix fragments for mma.m16n8k16 / m16n8k8 / m16n8k32".
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "check.cuh"
#include "operands.cuh"

namespace rpsim::cuda {
namespace {

// Element of row 0 of A / column 0 of B, zero elsewhere.
struct Operand {
  const std::uint32_t* v;
  int base;
  __device__ std::uint32_t at(bool in_row0, int col) const { return in_row0 ? v[base + col] : 0u; }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
// Four FP8 values (columns col..col+3 of the operand) in one register, the
// lowest column in the lowest byte.
__device__ std::uint32_t fp8x4(const Operand& v, int col, bool e4m3) {
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= fp8_bits(v.at(true, col + i), e4m3) << (8 * i);
  return r;
}
#endif

__device__ void mma_f16_f32(const std::uint32_t A[4], const std::uint32_t B[2], float D[4], bool bf16) {
  if (bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(D[0]), "+f"(D[1]), "+f"(D[2]), "+f"(D[3])
        : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(D[0]), "+f"(D[1]), "+f"(D[2]), "+f"(D[3])
        : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
  }
}

// One case's operands and accumulator, as seen by one lane.
struct Lane {
  const std::uint32_t *a, *b;  // the case's K values of a and b
  int lane, g, t;
  bool row0;  // lanes holding row 0 of A (and column 0 of B)
  std::uint32_t A[4] = {0, 0, 0, 0}, B[2] = {0, 0};
  float D[4] = {0.f, 0.f, 0.f, 0.f};
  std::uint32_t H[2] = {0, 0};  // f16 accumulator: two f16x2 registers
};

// m16n8k16 f16/bf16, f32 or f16 accumulator.
__device__ void run_m16n8k16(Mma op, int K, Lane& l) {
  const bool bf = op == Mma::m16n8k16_bf16_f32;
  auto enc = [&](std::uint32_t x) { return bf ? bf16_bits(x) : f16_bits(x); };
  for (int k0 = 0; k0 < K; k0 += 16) {
    const Operand va{l.a, k0}, vb{l.b, k0};
    const int t = l.t;
    // A regs 0 and 2 hold row g (cols 2t,2t+1 and 2t+8,2t+9); 1 and 3 row g+8.
    l.A[0] = l.row0 ? pack2(enc(va.at(true, 2 * t)), enc(va.at(true, 2 * t + 1))) : 0;
    l.A[2] = l.row0 ? pack2(enc(va.at(true, 2 * t + 8)), enc(va.at(true, 2 * t + 9))) : 0;
    // B regs: rows 2t,2t+1 and 2t+8,2t+9 of column g.
    l.B[0] = l.row0 ? pack2(enc(vb.at(true, 2 * t)), enc(vb.at(true, 2 * t + 1))) : 0;
    l.B[1] = l.row0 ? pack2(enc(vb.at(true, 2 * t + 8)), enc(vb.at(true, 2 * t + 9))) : 0;
    if (op == Mma::m16n8k16_f16_f16) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
          : "+r"(l.H[0]), "+r"(l.H[1])
          : "r"(l.A[0]), "r"(l.A[1]), "r"(l.A[2]), "r"(l.A[3]), "r"(l.B[0]), "r"(l.B[1]));
    } else {
      mma_f16_f32(l.A, l.B, l.D, bf);
    }
  }
}

__device__ void run_m16n8k8_tf32(int K, Lane& l) {
  for (int k0 = 0; k0 < K; k0 += 8) {
    const Operand va{l.a, k0}, vb{l.b, k0};
    // tf32 is read from the top 19 bits of a binary32 register.
    l.A[0] = va.at(l.row0, l.t);
    l.A[2] = va.at(l.row0, l.t + 4);
    l.B[0] = vb.at(l.row0, l.t);
    l.B[1] = vb.at(l.row0, l.t + 4);
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(l.D[0]), "+f"(l.D[1]), "+f"(l.D[2]), "+f"(l.D[3])
        : "r"(l.A[0]), "r"(l.A[1]), "r"(l.A[2]), "r"(l.A[3]), "r"(l.B[0]), "r"(l.B[1]));
  }
}

// m16n8k32 e4m3/e5m2 (sm_89 and newer), f32 or f16 accumulator.
__device__ void run_m16n8k32_fp8(Mma op, int K, Lane& l) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const bool e4m3 = op == Mma::m16n8k32_e4m3_f32 || op == Mma::m16n8k32_e4m3_f16;
  const bool f16_out = op == Mma::m16n8k32_e4m3_f16 || op == Mma::m16n8k32_e5m2_f16;
  for (int k0 = 0; k0 < K; k0 += 32) {
    const Operand va{l.a, k0}, vb{l.b, k0};
    l.A[0] = l.row0 ? fp8x4(va, 4 * l.t, e4m3) : 0u;
    l.A[2] = l.row0 ? fp8x4(va, 4 * l.t + 16, e4m3) : 0u;
    l.B[0] = l.row0 ? fp8x4(vb, 4 * l.t, e4m3) : 0u;
    l.B[1] = l.row0 ? fp8x4(vb, 4 * l.t + 16, e4m3) : 0u;
#define RPSIM_MMA_FP8_F16(T)                                    \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f16." T "." T \
               ".f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};" \
               : "+r"(l.H[0]), "+r"(l.H[1])                     \
               : "r"(l.A[0]), "r"(l.A[1]), "r"(l.A[2]), "r"(l.A[3]), "r"(l.B[0]), "r"(l.B[1]))
#define RPSIM_MMA_FP8_F32(T)                                                \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." T "." T             \
               ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
               : "+f"(l.D[0]), "+f"(l.D[1]), "+f"(l.D[2]), "+f"(l.D[3])     \
               : "r"(l.A[0]), "r"(l.A[1]), "r"(l.A[2]), "r"(l.A[3]), "r"(l.B[0]), "r"(l.B[1]))
    if (f16_out && e4m3)
      RPSIM_MMA_FP8_F16("e4m3");
    else if (f16_out)
      RPSIM_MMA_FP8_F16("e5m2");
    else if (e4m3)
      RPSIM_MMA_FP8_F32("e4m3");
    else
      RPSIM_MMA_FP8_F32("e5m2");
#undef RPSIM_MMA_FP8_F16
#undef RPSIM_MMA_FP8_F32
  }
#else
  // Not available below sm_89; the host never launches it there.
  (void)op, (void)K;
  l.D[0] = __int_as_float(0x7fffffff);
  l.H[0] = 0x7fffu;
#endif
}

__global__ void mma_kernel(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b,
                           const std::uint32_t* c, std::uint32_t* d, std::size_t cases) {
  const std::size_t cs = std::size_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (cs >= cases) return;  // whole warps exit together
  Lane l{a + cs * K, b + cs * K};
  l.lane = threadIdx.x % 32;
  l.g = l.lane >> 2;
  l.t = l.lane & 3;
  l.row0 = l.g == 0;
  if (l.lane == 0) {
    l.D[0] = f32(c[cs]);
    l.H[0] = f16_bits(c[cs]);
  }
  bool f16_out = false;
  switch (op) {
    case Mma::m16n8k16_f16_f16: f16_out = true; [[fallthrough]];
    case Mma::m16n8k16_f16_f32:
    case Mma::m16n8k16_bf16_f32: run_m16n8k16(op, K, l); break;
    case Mma::m16n8k8_tf32_f32: run_m16n8k8_tf32(K, l); break;
    case Mma::m16n8k32_e4m3_f16:
    case Mma::m16n8k32_e5m2_f16: f16_out = true; [[fallthrough]];
    case Mma::m16n8k32_e4m3_f32:
    case Mma::m16n8k32_e5m2_f32: run_m16n8k32_fp8(op, K, l); break;
    default: break;  // wgmma: wgmma.cu
  }
  // An fp16 result is widened to binary32 exactly, as in tc-golden.
  if (l.lane == 0) d[cs] = f16_out ? widen_f16(l.H[0]) : __float_as_uint(l.D[0]);
}

// Tiled GEMM: one warp per 16x8 output tile, k-blocks of 16 in increasing
// order (the order gemm_f16_f32's comment documents).
__global__ void gemm_kernel(int M, int N, int K, const std::uint16_t* A, const std::uint16_t* B,
                            const float* C, float* D) {
  const int tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int tiles_n = N / 8;
  if (tile >= (M / 16) * tiles_n) return;
  const int m0 = (tile / tiles_n) * 16, n0 = (tile % tiles_n) * 8;
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  float acc[4] = {C[(m0 + g) * N + n0 + 2 * t], C[(m0 + g) * N + n0 + 2 * t + 1],
                  C[(m0 + g + 8) * N + n0 + 2 * t], C[(m0 + g + 8) * N + n0 + 2 * t + 1]};
  for (int k0 = 0; k0 < K; k0 += 16) {
    auto a = [&](int r, int k) { return std::uint32_t(A[(m0 + r) * K + k0 + k]); };
    auto b = [&](int k, int c) { return std::uint32_t(B[(n0 + c) * K + k0 + k]); };  // column-major
    const std::uint32_t Af[4] = {
        pack2(a(g, 2 * t), a(g, 2 * t + 1)), pack2(a(g + 8, 2 * t), a(g + 8, 2 * t + 1)),
        pack2(a(g, 2 * t + 8), a(g, 2 * t + 9)), pack2(a(g + 8, 2 * t + 8), a(g + 8, 2 * t + 9))};
    const std::uint32_t Bf[2] = {pack2(b(2 * t, g), b(2 * t + 1, g)),
                                 pack2(b(2 * t + 8, g), b(2 * t + 9, g))};
    mma_f16_f32(Af, Bf, acc, false);
  }
  D[(m0 + g) * N + n0 + 2 * t] = acc[0];
  D[(m0 + g) * N + n0 + 2 * t + 1] = acc[1];
  D[(m0 + g + 8) * N + n0 + 2 * t] = acc[2];
  D[(m0 + g + 8) * N + n0 + 2 * t + 1] = acc[3];
}

}  // namespace

const std::vector<MmaInfo>& mmas() {
  static const std::vector<MmaInfo> table = {
      {Mma::m16n8k16_f16_f32, "mma.sync.m16n8k16.f32.f16.f16.f32", "mma.sync", "binary16", "binary32", 16, 80,
       0},
      {Mma::m16n8k16_f16_f16, "mma.sync.m16n8k16.f16.f16.f16.f16", "mma.sync", "binary16", "binary16", 16, 80,
       0},
      {Mma::m16n8k16_bf16_f32, "mma.sync.m16n8k16.f32.bf16.bf16.f32", "mma.sync", "bfloat16", "binary32", 16,
       80, 0},
      {Mma::m16n8k8_tf32_f32, "mma.sync.m16n8k8.f32.tf32.tf32.f32", "mma.sync", "tf32", "binary32", 8, 80, 0},
      {Mma::m16n8k32_e4m3_f32, "mma.sync.m16n8k32.f32.e4m3.e4m3.f32", "mma.sync", "e4m3", "binary32", 32, 89,
       0},
      {Mma::m16n8k32_e5m2_f32, "mma.sync.m16n8k32.f32.e5m2.e5m2.f32", "mma.sync", "e5m2", "binary32", 32, 89,
       0},
      {Mma::m16n8k32_e4m3_f16, "mma.sync.m16n8k32.f16.e4m3.e4m3.f16", "mma.sync", "e4m3", "binary16", 32, 89,
       0},
      {Mma::m16n8k32_e5m2_f16, "mma.sync.m16n8k32.f16.e5m2.e5m2.f16", "mma.sync", "e5m2", "binary16", 32, 89,
       0},
      {Mma::wgmma_m64n8k16_f16_f32, "wgmma.m64n8k16.f32.f16.f16", "wgmma", "binary16", "binary32", 16, 90,
       90},
      {Mma::wgmma_m64n8k16_f16_f16, "wgmma.m64n8k16.f16.f16.f16", "wgmma", "binary16", "binary16", 16, 90,
       90},
      {Mma::wgmma_m64n8k16_bf16_f32, "wgmma.m64n8k16.f32.bf16.bf16", "wgmma", "bfloat16", "binary32", 16, 90,
       90},
      {Mma::wgmma_m64n8k32_e4m3_f32, "wgmma.m64n8k32.f32.e4m3.e4m3", "wgmma", "e4m3", "binary32", 32, 90, 90},
      {Mma::wgmma_m64n8k32_e5m2_f32, "wgmma.m64n8k32.f32.e5m2.e5m2", "wgmma", "e5m2", "binary32", 32, 90, 90},
      {Mma::wgmma_m64n8k32_e4m3_f16, "wgmma.m64n8k32.f16.e4m3.e4m3", "wgmma", "e4m3", "binary16", 32, 90, 90},
      {Mma::wgmma_m64n8k32_e5m2_f16, "wgmma.m64n8k32.f16.e5m2.e5m2", "wgmma", "e5m2", "binary16", 32, 90, 90},
  };
  return table;
}

void mma(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
         std::uint32_t* d, std::size_t cases) {
  const MmaInfo* info = nullptr;
  for (const auto& m : mmas())
    if (m.op == op) info = &m;
  if (!info || K < 1 || K % info->k)
    throw CudaError("mma: K must be a positive multiple of the instruction's k");
  DeviceBuffer<std::uint32_t> da(a, cases * K), db(b, cases * K), dc(c, cases), dd(cases);
  if (std::string(info->instruction) == "wgmma") {
    launch_wgmma(op, K, da.get(), db.get(), dc.get(), dd.get(), cases);
  } else {
    constexpr unsigned warps = 4;
    mma_kernel<<<blocks_for(cases, warps), warps * 32>>>(op, K, da.get(), db.get(), dc.get(), dd.get(),
                                                         cases);
  }
  check(cudaGetLastError(), "mma kernel launch");
  check(cudaDeviceSynchronize(), "mma kernel");
  dd.to_host(d);
}

void gemm_f16_f32(int M, int N, int K, const std::uint16_t* A, const std::uint16_t* B, const float* C,
                  float* D) {
  if (M % 16 || N % 8 || K % 16) throw CudaError("gemm_f16_f32: M%16, N%8 and K%16 must be 0");
  DeviceBuffer<std::uint16_t> dA(A, std::size_t(M) * K), dB(B, std::size_t(K) * N);
  DeviceBuffer<float> dC(C, std::size_t(M) * N), dD(std::size_t(M) * N);
  const std::size_t tiles = std::size_t(M / 16) * (N / 8);
  constexpr unsigned warps = 4;
  gemm_kernel<<<blocks_for(tiles, warps), warps * 32>>>(M, N, K, dA.get(), dB.get(), dC.get(), dD.get());
  check(cudaGetLastError(), "gemm kernel launch");
  check(cudaDeviceSynchronize(), "gemm kernel");
  dD.to_host(D);
}

}  // namespace rpsim::cuda
