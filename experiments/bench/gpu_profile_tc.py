"""One emulated Tensor Core GEMM on the CUDA backend, for a profiler to look at (issue #39's speed: the
tc kernel runs at 0.006 of cuBLAS SGEMM). Run under Nsight Compute on the GPU machine, e.g.

    ncu --clock-control none --kernel-name regex:tc_gemm_kernel --launch-count 1 --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section WarpStateStats --section SourceCounters \
        python3 experiments/bench/gpu_profile_tc.py [SIZE] [MODEL]

(experiments/bench/gpu_session.sh PROFILE=1 does). Exit 77 without a GPU or the backend."""
import sys

import torch

from rpsim import _core

if not _core._cuda_built() or not torch.cuda.is_available():
    sys.exit(77)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
model = sys.argv[2] if len(sys.argv) > 2 else "tc:h100:fp16:fp32"
g = torch.Generator(device="cuda").manual_seed(5)
a = torch.randn((n, n), device="cuda", generator=g).half().float()
b = torch.randn((n, n), device="cuda", generator=g).half().float()
d = torch.empty((n, n), device="cuda")


def desc(v):
    return (v.data_ptr(), "float32", v.shape[0], v.shape[1], v.stride(0), v.stride(1))


_core._cuda_gemm(model, desc(a), desc(b), None, desc(d), torch.cuda.current_stream().cuda_stream)
torch.cuda.synchronize()
print(f"{model} {n}^3 done")
