// One warp per case: row 0 of A is the case's a, column 0 of B its b, C[0][0]
// its c; every other element is zero, so D[0][0] is exactly the dot product
// the tensor core computes for that row and column. Fragment layouts follow
// the PTX ISA, "Matrix fragments for mma.m16n8k16 / m16n8k8 / m16n8k32".
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "check.cuh"

namespace rpsim::cuda {
namespace {

__device__ float f32(std::uint32_t b) {
  return __uint_as_float(b);
}
__device__ std::uint32_t f16_bits(std::uint32_t b) {
  return __half_as_ushort(__float2half_rn(f32(b)));
}
__device__ std::uint32_t bf16_bits(std::uint32_t b) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f32(b)));
}
__device__ std::uint32_t pack2(std::uint32_t lo, std::uint32_t hi) {
  return lo | hi << 16;
}

// Element of row 0 of A / column 0 of B, zero elsewhere.
struct Operand {
  const std::uint32_t* v;
  int base;
  __device__ std::uint32_t at(bool in_row0, int col) const { return in_row0 ? v[base + col] : 0u; }
};

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

__global__ void mma_kernel(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b,
                           const std::uint32_t* c, std::uint32_t* d, std::size_t cases) {
  const std::size_t cs = std::size_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (cs >= cases) return;  // whole warps exit together
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const bool row0 = g == 0;  // lanes holding row 0 of A (and column 0 of B)
  const int base = int(cs) * K;
  std::uint32_t A[4] = {0, 0, 0, 0}, B[2] = {0, 0};
  float D[4] = {0.f, 0.f, 0.f, 0.f};
  std::uint32_t H[2] = {0, 0};  // f16 accumulator: two f16x2 registers
  if (lane == 0) {
    D[0] = f32(c[cs]);
    H[0] = f16_bits(c[cs]);
  }
  switch (op) {
    case Mma::m16n8k16_f16_f32:
    case Mma::m16n8k16_bf16_f32:
    case Mma::m16n8k16_f16_f16: {
      const bool bf = op == Mma::m16n8k16_bf16_f32;
      auto enc = [&](std::uint32_t x) { return bf ? bf16_bits(x) : f16_bits(x); };
      for (int k0 = 0; k0 < K; k0 += 16) {
        const Operand va{a, base + k0}, vb{b, base + k0};
        // A regs 0 and 2 hold row g (cols 2t,2t+1 and 2t+8,2t+9); 1 and 3 row g+8.
        A[0] = row0 ? pack2(enc(va.at(true, 2 * t)), enc(va.at(true, 2 * t + 1))) : 0;
        A[2] = row0 ? pack2(enc(va.at(true, 2 * t + 8)), enc(va.at(true, 2 * t + 9))) : 0;
        // B regs: rows 2t,2t+1 and 2t+8,2t+9 of column g.
        B[0] = row0 ? pack2(enc(vb.at(true, 2 * t)), enc(vb.at(true, 2 * t + 1))) : 0;
        B[1] = row0 ? pack2(enc(vb.at(true, 2 * t + 8)), enc(vb.at(true, 2 * t + 9))) : 0;
        if (op == Mma::m16n8k16_f16_f16) {
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
              : "+r"(H[0]), "+r"(H[1])
              : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
        } else {
          mma_f16_f32(A, B, D, bf);
        }
      }
      break;
    }
    case Mma::m16n8k8_tf32_f32:
      for (int k0 = 0; k0 < K; k0 += 8) {
        const Operand va{a, base + k0}, vb{b, base + k0};
        // tf32 is read from the top 19 bits of a binary32 register.
        A[0] = va.at(row0, t);
        A[2] = va.at(row0, t + 4);
        B[0] = vb.at(row0, t);
        B[1] = vb.at(row0, t + 4);
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(D[0]), "+f"(D[1]), "+f"(D[2]), "+f"(D[3])
            : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
      }
      break;
    case Mma::m16n8k32_e4m3_f32:
    case Mma::m16n8k32_e5m2_f32:
    case Mma::m16n8k32_e4m3_f16:
    case Mma::m16n8k32_e5m2_f16: {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
      const bool e4m3 = op == Mma::m16n8k32_e4m3_f32 || op == Mma::m16n8k32_e4m3_f16;
      const __nv_fp8_interpretation_t kind = e4m3 ? __NV_E4M3 : __NV_E5M2;
      auto pack4 = [&](const Operand& v, int col) {
        std::uint32_t r = 0;
        for (int i = 0; i < 4; ++i)
          r |= std::uint32_t(__nv_cvt_float_to_fp8(f32(v.at(row0, col + i)), __NV_NOSAT, kind)) << (8 * i);
        return row0 ? r : 0u;
      };
      for (int k0 = 0; k0 < K; k0 += 32) {
        const Operand va{a, base + k0}, vb{b, base + k0};
        A[0] = pack4(va, 4 * t);
        A[2] = pack4(va, 4 * t + 16);
        B[0] = pack4(vb, 4 * t);
        B[1] = pack4(vb, 4 * t + 16);
        if (op == Mma::m16n8k32_e4m3_f16) {
          asm volatile(
              "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
              : "+r"(H[0]), "+r"(H[1])
              : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
        } else if (op == Mma::m16n8k32_e5m2_f16) {
          asm volatile(
              "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
              : "+r"(H[0]), "+r"(H[1])
              : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
        } else if (op == Mma::m16n8k32_e4m3_f32) {
          asm volatile(
              "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
              "{%0,%1,%2,%3};"
              : "+f"(D[0]), "+f"(D[1]), "+f"(D[2]), "+f"(D[3])
              : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
        } else {
          asm volatile(
              "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
              "{%0,%1,%2,%3};"
              : "+f"(D[0]), "+f"(D[1]), "+f"(D[2]), "+f"(D[3])
              : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
        }
      }
#else
      // Not available below sm_89; the host never launches it there.
      D[0] = __int_as_float(0x7fffffff);
      H[0] = 0x7fffu;
#endif
      break;
    }
  }
  if (lane == 0) {
    // An fp16 result is widened to binary32 exactly, as in tc-golden.
    const bool f16_out =
        op == Mma::m16n8k16_f16_f16 || op == Mma::m16n8k32_e4m3_f16 || op == Mma::m16n8k32_e5m2_f16;
    d[cs] = f16_out ? __float_as_uint(__half2float(__ushort_as_half(std::uint16_t(H[0]))))
                    : __float_as_uint(D[0]);
  }
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
      {Mma::m16n8k16_f16_f32, "mma.sync.m16n8k16.f32.f16.f16.f32", "binary16", "binary32", 16, 80},
      {Mma::m16n8k16_f16_f16, "mma.sync.m16n8k16.f16.f16.f16.f16", "binary16", "binary16", 16, 80},
      {Mma::m16n8k16_bf16_f32, "mma.sync.m16n8k16.f32.bf16.bf16.f32", "bfloat16", "binary32", 16, 80},
      {Mma::m16n8k8_tf32_f32, "mma.sync.m16n8k8.f32.tf32.tf32.f32", "tf32", "binary32", 8, 80},
      {Mma::m16n8k32_e4m3_f32, "mma.sync.m16n8k32.f32.e4m3.e4m3.f32", "e4m3", "binary32", 32, 89},
      {Mma::m16n8k32_e5m2_f32, "mma.sync.m16n8k32.f32.e5m2.e5m2.f32", "e5m2", "binary32", 32, 89},
      {Mma::m16n8k32_e4m3_f16, "mma.sync.m16n8k32.f16.e4m3.e4m3.f16", "e4m3", "binary16", 32, 89},
      {Mma::m16n8k32_e5m2_f16, "mma.sync.m16n8k32.f16.e5m2.e5m2.f16", "e5m2", "binary16", 32, 89},
  };
  return table;
}

void mma(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
         std::uint32_t* d, std::size_t cases) {
  DeviceBuffer<std::uint32_t> da(a, cases * K), db(b, cases * K), dc(c, cases), dd(cases);
  constexpr unsigned warps = 4;
  mma_kernel<<<blocks_for(cases, warps), warps * 32>>>(op, K, da.get(), db.get(), dc.get(), dd.get(), cases);
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
