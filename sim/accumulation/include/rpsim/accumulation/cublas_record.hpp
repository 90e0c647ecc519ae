// How cuBLAS computed one GEMM, as a capture recorded it (rpsim.torch.
// capture_gemms on a GPU: cuBLASLt's heuristic answer for the call and the
// kernels it launched) or a heuristic table holds it (cublas_table.hpp), read
// into a kernel schedule. The rules, one per kernel family, each with its
// evidence, are in cublas_record.cpp.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "rpsim/accumulation/kernel_schedule.hpp"

namespace rpsim::sim {

struct CublasKernel {
  std::string name;                   // as the profiler names it
  std::array<long, 3> grid{0, 0, 0};  // 0: not recorded
};

// cuBLASLt's CUBLASLT_REDUCTION_SCHEME values (cublasLt.h).
enum CublasReductionScheme : int {
  cublas_reduction_none = 0,  // GemmSplitKSerial: the slices take turns on D
  cublas_reduction_inplace = 1,
  cublas_reduction_compute_type = 2,
  cublas_reduction_output_type = 4,
};

struct CublasRecord {
  // cuBLASLt's top heuristic algorithm for the call (CUBLASLT_ALGO_CONFIG_*).
  std::optional<int> algo_id, tile_id, stages_id, splitk_num, reduction_scheme, custom_option;
  std::vector<CublasKernel> kernels;  // launched, in order (empty: not recorded)
  bool empty() const { return !splitk_num && kernels.empty(); }
};

struct RecordedSchedule {
  // The schedule the record says; none when it names a kernel no schedule
  // models (segment-K, an atomic reduction, a CUDA-core kernel whose order's
  // numbers are not known for this GPU): `why` says which.
  std::optional<KernelSchedule> schedule;
  std::string family;  // "nvjet split-K 3 x 64, binary32 workspace", "cutlass s1688 ...", ...
  std::string why;
};

// The schedule of a GEMM with K products per element the record describes,
// over `base` (the preset's schedule for the shape: instruction, formats, FP8
// promotion and scale epilogue, which the record does not change).
// m and n (the GEMM's, torch's M x N; 0: not known) decide what a kernel's
// name does not say: a dot_kernel's vector width.
RecordedSchedule schedule_from_record(const KernelSchedule& base, long k, const CublasRecord& record,
                                      long m = 0, long n = 0);

}  // namespace rpsim::sim
