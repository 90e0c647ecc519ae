"""Regenerates the captures sim/accumulation/fit/cublas_h100_grid.py reads, on the GPU the table is for:
grid.json + grid.npz (every shape of the grid below, 8 GEMM kinds) or, with --rand N, rand.json + rand.npz
(N random shapes: M, N multiples of 16 in 32..2048, K multiples of 32 in 256..16384, log-uniform, --seed).

For each GEMM: A and B from the index hash (exact values of the input format; nothing random to store),
the GEMM run as torch calls it (torch.mm, @, torch._scaled_mm; nothing forced), the kernels it launched
(names and grids, from the profiler), and three 8x8 blocks of D (top left, centre, bottom right).
Needs torch with CUDA; not rpsim. Usage: python3 sim/accumulation/fit/cublas_grid_capture.py OUT_DIR
[--rand N] [--seed S]. (Written for issue #38 from the format the fit reads; the session-10 capture was
made by an earlier script of the same design. Run on a GPU: owed.)
"""
import json
import math
import os
import random
import sys
import tempfile

import numpy as np

GRID_M = [64, 96, 128, 256, 384, 512, 1024, 2048, 4096]
GRID_N = [64, 128, 192, 256, 512, 1024, 4096]
GRID_K = [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288]
VARIANTS = ["fp16_fp32", "fp16_fp16_red0", "fp16_fp16_red1", "bf16_bf16_red0", "bf16_bf16_red1", "tf32_fp32",
            "e4m3_float32", "e4m3_bfloat16"]
PBITS = {"tf32": 23, "fp16": 10, "bf16": 7, "e4m3": 3}
MASK, HMUL = 0xFFFFFFFF, 0x45D9F3B


def hashed(idx, salt, p):
    """The value at flat index idx: p mantissa bits, exponent -3..1, a sign (exact in float64)."""
    h = (idx.astype(np.int64) + salt) & MASK
    h = (((h >> 16) ^ h) * HMUL) & MASK
    h = (((h >> 16) ^ h) * HMUL) & MASK
    h = (h >> 16) ^ h
    mant = (h & ((1 << p) - 1)) + (1 << p)
    e = ((h >> p) % 5) - 3 - p
    s = 1 - 2 * ((h >> 31) & 1)
    return np.ldexp((s * mant).astype(np.float64), e.astype(np.int64))


def run(torch, variant, a, b):
    """The GEMM as a user's torch code calls it."""
    kind = variant.split("_")[0]
    m = torch.backends.cuda.matmul
    if kind == "fp16":
        a, b = a.half(), b.half()
        if variant == "fp16_fp32":
            return torch.mm(a, b, out_dtype=torch.float32)
        m.allow_fp16_reduced_precision_reduction = variant.endswith("red1")
        return a @ b
    if kind == "bf16":
        m.allow_bf16_reduced_precision_reduction = variant.endswith("red1")
        return a.bfloat16() @ b.bfloat16()
    if kind == "tf32":
        m.allow_tf32 = True
        return a.float() @ b.float()
    one = torch.ones((), device="cuda")
    out = torch.float32 if variant.endswith("float32") else torch.bfloat16
    b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()  # _scaled_mm takes B column-major
    return torch._scaled_mm(a.to(torch.float8_e4m3fn), b8, scale_a=one, scale_b=one, out_dtype=out)


def kernels_of(torch, fn):
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()  # warm: the first call loads the kernel
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.unlink(path)
    return out, [{"name": e["name"], "grid": e.get("args", {}).get("grid", [])} for e in events
                 if e.get("cat") in ("kernel", "Kernel")]


def shapes(args):
    if "--rand" not in args:
        return [(m, n, k) for m in GRID_M for n in GRID_N for k in GRID_K], "grid"
    count = int(args[args.index("--rand") + 1])
    rng = random.Random(int(args[args.index("--seed") + 1]) if "--seed" in args else 10)
    log = lambda lo, hi, q: max(lo, min(hi, round(math.exp(rng.uniform(math.log(lo), math.log(hi))) / q) * q))
    return [(log(32, 2048, 16), log(32, 2048, 16), log(256, 16384, 32)) for _ in range(count)], "rand"


def main(args):
    import torch
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    out_dir = args[0]
    os.makedirs(out_dir, exist_ok=True)
    grid, name = shapes(args)
    cases, blocks, i = [], {}, 0
    for variant in VARIANTS:
        p = PBITS[variant.split("_")[0]]
        for m, n, k in grid:
            sa, sb = 1_000_003 * i + 17, 1_000_003 * i + 500_009
            a = torch.tensor(hashed(np.arange(m * k), sa, p).reshape(m, k), dtype=torch.float32, device="cuda")
            b = torch.tensor(hashed(np.arange(k * n), sb, p).reshape(k, n), dtype=torch.float32, device="cuda")
            d, ks = kernels_of(torch, lambda: run(torch, variant, a, b))
            at = [[0, 0], [m // 2, n // 2], [m - 8, n - 8]]
            blocks[f"d{i}"] = np.stack([d[r:r + 8, c:c + 8].float().cpu().numpy() for r, c in at])
            cases.append({"i": i, "variant": variant, "m": m, "n": n, "k": k, "blocks": at, "kernels": ks})
            i += 1
        print(f"{variant}: {len(grid)} shapes", file=sys.stderr)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": cases}, f)
    np.savez_compressed(os.path.join(out_dir, f"{name}.npz"), **blocks)


if __name__ == "__main__":
    main(sys.argv[1:])
