"""Regenerates the captures sim/accumulation/fit/cublas_h100_grid.py reads, on the GPU the table is for:
grid.json + grid.npz (every shape of the grid below, 8 GEMM kinds) or, with --rand N, rand.json + rand.npz
(N random shapes: M, N multiples of 16 in 32..2048, K multiples of 32 in 256..16384, log-uniform, --seed).

For each GEMM: A and B from the index hash (exact values of the input format; nothing random to store),
the GEMM run as torch calls it (torch.mm, @, torch._scaled_mm; nothing forced), the kernels it launched
(names and grids, from the profiler), and three 8x8 blocks of D (top left, centre, bottom right).
Needs torch with CUDA; not rpsim. Usage: python3 sim/accumulation/fit/cublas_grid_capture.py OUT_DIR
[--rand N] [--seed S].

--heldout N [--seed S] [--deadline SECONDS] [--name NAME] [--kinds K1,K2] [--thin]: issue #40's held-out
capture instead
(NAME.json/.npz, default heldout; seed 40 is the held-out set, never read by a fit; another seed and name
make a set to fit on): N random shapes (M, N 1..8192 with thin ones, K 1..32768) under 7 kinds (tf32, fp16->fp32,
fp16 and bf16 with reduced-precision reduction off and on, e4m3 _scaled_mm), each with the cuBLASLt
heuristic's answer for the call. (Written for issue #38 from the format the fit reads; the session-10 capture was
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


def prepare(torch, variant, a, b):
    """A and B already in the kind's dtype and layout, so that run()'s own casts launch nothing and the
    profiled call holds the GEMM's kernels alone (the first held-out capture, 2026-11-29, also recorded
    the casts: cublas_heldout_eval.py drops them)."""
    kind = variant.split("_")[0]
    if kind in ("fp16", "bf16"):
        dtype = torch.float16 if kind == "fp16" else torch.bfloat16
        return a.to(dtype), b.to(dtype)
    if kind == "e4m3":
        return a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
    return a, b


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


def hashed_torch(torch, rows, cols, salt, p, device="cuda"):
    """hashed() on the device (the same integer steps in int64), for the held-out capture's large operands."""
    h = (torch.arange(rows * cols, dtype=torch.int64, device=device) + salt) & MASK
    h = (((h >> 16) ^ h) * HMUL) & MASK
    h = (((h >> 16) ^ h) * HMUL) & MASK
    h = (h >> 16) ^ h
    mant = ((h & ((1 << p) - 1)) + (1 << p)).to(torch.float64)
    e = ((h >> p) % 5) - 3 - p
    s = 1 - 2 * ((h >> 31) & 1)
    return torch.ldexp(s * mant, e.to(torch.float64)).to(torch.float32).reshape(rows, cols)


# The held-out capture of issue #40: the kinds and their cuBLASLt query (torch's dtypes and flags).
HELDOUT = {"tf32_fp32": ("float32", "float32", {"allow_tf32": True}),
           "fp16_fp32": ("float16", "float32", {}),
           "fp16_fp16_red0": ("float16", "float16", {"reduced_precision_reduction": False}),
           "fp16_fp16_red1": ("float16", "float16", {"reduced_precision_reduction": True}),
           "bf16_bf16_red0": ("bfloat16", "bfloat16", {"reduced_precision_reduction": False}),
           "bf16_bf16_red1": ("bfloat16", "bfloat16", {"reduced_precision_reduction": True}),
           "e4m3_float32": ("float8_e4m3fn", "float32", {"b_transposed": True})}


def heldout_shapes(count, seed, thin=False):
    """M, N log-uniform in 16..8192, K in 16..32768, any integer; 15 % of shapes thin (M or N in 1..16) and
    10 % with K in 1..16 (thin: every shape thin, for the CUDA-core kernels). e4m3 rounds each up to a
    multiple of 16 (torch._scaled_mm's rule)."""
    rng = random.Random(seed)
    log = lambda lo, hi: max(lo, min(hi, round(math.exp(rng.uniform(math.log(lo), math.log(hi))))))
    out = []
    for _ in range(count):
        m, n, k = log(16, 8192), log(16, 8192), log(16, 32768)
        if thin or rng.random() < 0.15:
            m, n = (log(1, 16), n) if rng.random() < 0.5 else (m, log(1, 16))
        if rng.random() < 0.1:
            k = log(1, 16)
        out.append((m, n, k))
    return out


def heldout(torch, out_dir, count, seed, deadline, name="heldout", kinds=None, thin=False):
    """Held-out capture (never read by the fit): every shape under every HELDOUT kind, shapes outermost so a
    deadline leaves all kinds equally covered. Each case keeps the cuBLASLt heuristic's answer for the call
    (the recorded-schedule path), the kernels launched and three blocks of D (8x8, fewer where M or N < 8).
    heldout.json + heldout.npz are rewritten every 50 cases."""
    import importlib.util
    import time
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "..", "experiments", "python", "rpsim", "torch", "_cublaslt.py")
    spec = importlib.util.spec_from_file_location("rpsim_cublaslt", path)
    cl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cl)
    lt = cl.CublasLt()
    start, cases, blocks, i = time.time(), [], {}, 0
    for m0, n0, k0 in heldout_shapes(count, seed, thin):
        for variant, (dtype, d_dtype, flags) in HELDOUT.items():
            if kinds and variant not in kinds:
                continue
            if time.time() - start > deadline:
                return save(torch, out_dir, name, cases, blocks, f"deadline after {i} cases")
            m, n, k = (-(-x // 16) * 16 for x in (m0, n0, k0)) if dtype.startswith("float8") else (m0, n0, k0)
            p = PBITS[variant.split("_")[0]]
            sa, sb = 1_000_003 * i + 17, 1_000_003 * i + 500_009
            case = {"i": i, "variant": variant, "m": m, "n": n, "k": k}
            try:
                a, b = prepare(torch, variant, hashed_torch(torch, m, k, sa, p), hashed_torch(torch, k, n, sb, p))
                q = cl.torch_query(m, n, k, dtype, dtype, d_dtype, **flags)
                case["heuristic"] = lt.heuristic(q)
                d, case["kernels"] = kernels_of(torch, lambda: run(torch, variant, a, b))
                at = [[0, 0], [m // 2, n // 2], [m - 8, n - 8]]
                at = [[max(0, min(r, m - 8)), max(0, min(c, n - 8))] for r, c in at]
                blocks[f"d{i}"] = np.stack([d[r:r + 8, c:c + 8].float().cpu().numpy() for r, c in at])
                case["blocks"] = at
            except Exception as e:  # noqa: BLE001 (a case torch or cuBLAS refuses is kept, with why)
                case["error"] = f"{type(e).__name__}: {e}"
            cases.append(case)
            i += 1
            if i % 50 == 0:
                save(torch, out_dir, name, cases, blocks, f"{i} cases, {time.time() - start:.0f} s")
    return save(torch, out_dir, name, cases, blocks, "complete")


def save(torch, out_dir, name, cases, blocks, status):
    """NAME.json and NAME.npz, each written to a temporary name and renamed."""
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "status": status, "cases": cases}
    with open(os.path.join(out_dir, f"{name}.json.tmp"), "w") as f:
        json.dump(meta, f)
    np.savez_compressed(os.path.join(out_dir, f"{name}.tmp.npz"), **blocks)
    os.replace(os.path.join(out_dir, f"{name}.json.tmp"), os.path.join(out_dir, f"{name}.json"))
    os.replace(os.path.join(out_dir, f"{name}.tmp.npz"), os.path.join(out_dir, f"{name}.npz"))
    print(f"{name}: {len(cases)} cases ({status})", file=sys.stderr, flush=True)


def main(args):
    import torch
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    out_dir = args[0]
    os.makedirs(out_dir, exist_ok=True)
    if "--heldout" in args:
        opt = {args[i]: args[i + 1] for i in range(1, len(args) - 1) if args[i].startswith("--")}
        return heldout(torch, out_dir, int(opt["--heldout"]), int(opt.get("--seed", 40)),
                       float(opt.get("--deadline", "inf")), opt.get("--name", "heldout"),
                       opt["--kinds"].split(",") if "--kinds" in opt else None, "--thin" in args)
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
