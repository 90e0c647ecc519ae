"""The CUDA backend's checks that need a GPU (issue #39), in one run on the GPU machine:

  1. rounding: the device's bits against the CPU core's (rpsim.encode, the C++ array path) for every
     format and mode, --values inputs per format and mode (default 10^8: uniform, log-uniform over the
     format's range and beyond, raw binary64 patterns), binary64 input, then binary32 input;
  2. GEMMs: every accumulation kind training uses at --shapes random shapes each, D's bits against
     rpsim.gemm on the CPU (sequential binary32/binary64 and stochastic, the Tensor Core presets, the
     H100 FP8 two-step path, block-scaled tcgen05 with MX and NVFP4 scales, split-K schedules, cuBLAS
     presets, _scaled_mm scales);
  3. block quantisation (rpsim_cuda_block_quantize): codes and per-entry scales against rpsim.quantize
     (the recipe mechanism recipe-check holds to TE and torchao) for MX, NVFP4 and FP8 block rows, in
     lines and tiles; stochastic MX and NVFP4 values against rpsim train's quantiser
     (_torch_block_quantize), at --shapes random shapes each;
  4. rpsim.torch.quantize on CUDA tensors (the module's routing to the backend) against the CPU's;
  5. speed: an emulated tc:h100:fp16:fp32 GEMM 4096^3 against cuBLAS SGEMM (binary32, TF32 off) in the
     same process, CUDA-event timed, with the memory each takes (aim: >= 1/10).

    PYTHONPATH=build/python python3 experiments/bench/gpu_backend_check.py [--values N] [--shapes S]
        [--quick] [--out results/gpu-backend]

Prints `name: passed/total bit-exact` per check, the ratio table, writes report.json, and ends with
`N passed, M failed`. Exit 0 all bit-exact, 1 a mismatch, 77 nothing was checked (no CUDA device, no
PyTorch with CUDA, or rpsim built without the backend; it says which on stderr).
"""
import argparse
import json
import pathlib
import sys
import time

import numpy as np

SKIP = 77
FORMATS = ["binary16", "bfloat16", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m2", "e2m3", "e2m1", "e8m0",
           "tf32", "binary32", "q16.14"]
MODES = ["rne", "rna", "rtz", "rd", "ru", "rodd", "sr"]
GEMM_MODELS = [
    ("sequential:fp32:rne", "float32", None), ("sequential:fp64:rne", "float64", None),
    ("sequential:bf16:sr:seed=5", "bfloat16", None), ("fma:fp64:rne", "float64", None),
    ("tc:h100:fp16:fp32", "binary16", None), ("tc:h100:bf16:fp32", "bfloat16", None),
    ("tc:h100:fp16:fp16", "binary16", None), ("tc:h100:tf32:fp32", "tf32", None),
    ("tc:h100:e4m3:fp32", "e4m3", None), ("tc:h100:e5m2:fp16", "e5m2", None),
    ("tc:h100:e4m3:fp32:wgmma", "e4m3", None), ("tc:a100:bf16:fp32", "bfloat16", None),
    ("tc:ada:e4m3:fp32", "e4m3", None), ("tc:b200:bf16:fp32:tcgen05.mma", "bfloat16", None),
    ("tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0", "e4m3", ("e8m0", 32)),
    ("tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3", "e2m1", ("e4m3", 16)),
    ("cublas:h100:fp16:fp32", "binary16", None), ("cublas:h100:bf16:bf16", "bfloat16", None),
    ("cublas:h100:tf32:fp32", "binary32", None), ("cublas:h100:e4m3:fp32", "e4m3", None),
    ("kernel:h100:fp16:fp32:split_k=3", "binary16", None),
    ("kernel:h100:e4m3:fp32:wgmma:promotion=4", "e4m3", None),
]

SPEED_MODELS = ["sequential:fp32:rne", "tc:h100:bf16:fp32", "tc:h100:e4m3:fp32:wgmma",
                "cublas:h100:fp16:fp32", "tc:b200:bf16:fp32:tcgen05.mma"]


def fail_skip(why):
    print(f"gpu_backend_check: nothing checked: {why}", file=sys.stderr)
    sys.exit(SKIP)


def setup():
    try:
        import torch
    except ImportError as e:
        fail_skip(f"no PyTorch ({e})")
    try:
        import rpsim
        from rpsim import _core
    except ImportError as e:
        fail_skip(f"rpsim not importable ({e}; PYTHONPATH=build/python)")
    if not _core._cuda_built():
        fail_skip("rpsim was built without the CUDA backend (no nvcc at configure time)")
    if not torch.cuda.is_available() or _core._cuda_device_count() == 0:
        fail_skip("no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch, rpsim, _core


class Tally:
    """The rows so far; report.json is rewritten (atomically) after each, so a run stopped at its time
    limit keeps what it checked."""

    def __init__(self, out, info):
        self.rows, self.failed, self.out, self.info = [], 0, out, info

    def add(self, name, passed, total, first=""):
        self.rows.append({"name": name, "passed": int(passed), "total": int(total), "first_mismatch": first})
        self.failed += passed != total
        print(f"{name}: {passed}/{total} bit-exact" + (f" (first: {first})" if first else ""), flush=True)
        self.write()

    def write(self):
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / "report.json.tmp"
        tmp.write_text(json.dumps({**self.info, "checks": self.rows}, indent=1))
        tmp.replace(self.out / "report.json")


def inputs(n, chunk, dtype):
    """n values: uniform (-1,1), log-uniform 2^-160..2^140 of both signs, and raw binary64 patterns."""
    g = np.random.default_rng(1000 + chunk)
    x = np.empty(n, np.float64)
    q = n // 4
    x[:q] = g.uniform(-1, 1, q)
    x[q:3 * q] = np.exp2(g.uniform(-160, 140, 2 * q)) * np.where(g.random(2 * q) < 0.5, -1, 1)
    x[3 * q:] = g.integers(0, 2**64, n - 3 * q, dtype=np.uint64, endpoint=False).view(np.float64)
    return x.astype(dtype) if dtype == np.float32 else x


def check_rounding(torch, rpsim, core, tally, values, chunk_size, threads):
    """Each chunk's inputs are made once per input type and kept on both sides; the CPU's codes go up
    to the device in their own width and are compared there (a 10^8-value row costs about a second)."""
    stream = torch.cuda.current_stream().cuda_stream
    for in_dtype, np_dtype in (("float64", np.float64), ("float32", np.float32)):
        chunks = [inputs(chunk_size, c, np_dtype) for c in range(max(1, values // chunk_size))]
        on_device = [torch.from_numpy(x).cuda() for x in chunks]
        bits = torch.empty(chunk_size, dtype=torch.int64, device="cuda")
        for fmt in FORMATS:
            for mode in MODES:
                ok = total = 0
                first = ""
                for c, (x, xd) in enumerate(zip(chunks, on_device)):
                    core._cuda_round(fmt, xd.data_ptr(), in_dtype, bits.data_ptr(), "uint64", x.size, stream,
                                     rounding=mode, seed=77, stream_id=c)
                    want = rpsim.encode(x, fmt, mode, seed=77, stream=c, threads=threads)
                    signed = want.view({1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[want.itemsize])
                    mask = (1 << (8 * want.itemsize)) - 1 if want.itemsize < 8 else -1
                    same = (torch.from_numpy(signed).cuda().to(torch.int64) & mask) == bits
                    total += x.size
                    good = int(same.sum().item())
                    ok += good
                    if good != x.size and not first:
                        i = int(torch.nonzero(~same)[0].item())
                        first = (f"chunk {c} element {i}: input {x[i]!r} cpu {int(want[i]):#x} "
                                 f"gpu {int(bits[i].item()) & (2**64 - 1):#x}")
                tally.add(f"round {in_dtype} -> {fmt} {mode}", ok, total, first)
        del on_device


def random_values(rng, fmt_name, shape, rpsim, specials=False):
    """Values of the format; with specials, about 1 % infinities and NaN (the format's own after
    rounding: E4M3 has no infinity), which send a Tensor Core tile down its checked step."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))
    if specials:
        where = rng.random(shape) < 0.01
        x[where] = rng.choice([np.inf, -np.inf, np.nan], int(where.sum()))
    return rpsim.round(x, fmt_name) if fmt_name not in ("float32", "float64") else x.astype(fmt_name)


def check_gemms(torch, rpsim, core, tally, shapes, threads):
    rng = np.random.default_rng(39)
    stream = torch.cuda.current_stream().cuda_stream
    for model, fmt, scaled in GEMM_MODELS:
        try:  # a model that cannot run is its own failed row; the next model still runs
            check_gemm(torch, rpsim, core, tally, rng, stream, model, fmt, scaled, shapes, threads)
        except Exception as e:  # noqa: BLE001 (reported and counted)
            tally.add(f"gemm {model}: raised {type(e).__name__}: {e}", 0, 1)


def check_gemm(torch, rpsim, core, tally, rng, stream, model, fmt, scaled, shapes, threads):
    ok = total = 0
    first = ""
    for s in range(shapes):
        m, n = int(rng.integers(1, 300)), int(rng.integers(1, 300))
        block = scaled[1] if scaled else 1
        k = int(rng.integers(1, 2000 // block + 1)) * block
        special = s % 4 == 3  # every fourth shape: infinities and NaN among the operands
        a, b = random_values(rng, fmt, (m, k), rpsim, special), random_values(rng, fmt, (k, n), rpsim, special)
        c = rng.integers(-255, 256, (m, n)) / 8.0  # a value of every output format (8 bits)
        kw, dev = {}, {}
        if scaled:
            sfa = rpsim.round(np.exp2(rng.integers(-4, 5, (m, k // block))).astype(np.float64), scaled[0])
            sfb = rpsim.round(np.exp2(rng.integers(-4, 5, (k // block, n))).astype(np.float64), scaled[0])
            kw = {"sfa": sfa, "sfb": sfb, "block": block}  # (the spec names scale=)
            dev = {"sfa": sfa, "sfb": sfb}
        want = rpsim.gemm(a, b, model=model, C=c, threads=threads, **kw)
        # Odd shapes hand A and B over as float32 (what a torch model holds; the native binary32
        # kernel runs on them), even ones as float64; binary64 models keep float64.
        f32 = s % 2 == 1 and "fp64" not in model
        t = {}
        for name, v in {"a": a, "b": b, "c": c, **dev}.items():
            dtype = np.float32 if f32 and name in ("a", "b") else np.float64
            t[name] = torch.from_numpy(np.ascontiguousarray(v, dtype)).cuda()
        d = torch.empty((m, n), dtype=torch.float64, device="cuda")

        def desc(v):
            dtype = "float32" if v.dtype == torch.float32 else "float64"
            return (v.data_ptr(), dtype, v.shape[0], v.shape[1], v.stride(0), v.stride(1))
        core._cuda_gemm(model, desc(t["a"]), desc(t["b"]), desc(t["c"]), desc(d), stream,
                        sfa=desc(t["sfa"]) if scaled else None, sfb=desc(t["sfb"]) if scaled else None)
        got = d.cpu().numpy()
        same = got.view(np.uint64) == np.asarray(want, np.float64).view(np.uint64)
        total += same.size
        ok += int(same.sum())
        if not first and not same.all():
            i, j = map(int, np.argwhere(~same)[0])
            first = f"{m}x{k}x{n} ({i},{j}): cpu {want[i, j]!r} gpu {got[i, j]!r}"
    tally.add(f"gemm {model}", ok, total, first)


# (recipe, options, the trainer's element format and scaling for the stochastic check or None, block, tiles)
BLOCK_CASES = [
    ("torchao-mx", "element=e4m3,scale_rule=floor", ("e4m3", "mx"), 32, False),
    ("torchao-mx", "element=e4m3,scale_rule=rceil", None, 32, False),
    ("torchao-mx", "element=e2m1,scale_rule=even", None, 32, False),
    ("torchao-mx", "element=e2m1", ("e2m1", "mx"), 32, False),  # (the trainer's default rule: floor)
    ("ocp-mx", "element=int8", None, 32, False),
    ("te-nvfp4", "", ("e2m1", "nvfp4"), 16, False),
    ("te-nvfp4", "tile=16x16,formula=te-2026-02", None, 16, True),
    ("te-fp8-block", "element=e4m3", None, 128, False),
    ("te-fp8-block", "tile=128x128,pow2=true", None, 128, True),
]


def check_block_quantize(torch, rpsim, core, tally, shapes):
    rng = np.random.default_rng(40)
    stream = torch.cuda.current_stream().cuda_stream

    def desc(v):
        return (v.data_ptr(), "float32" if v.dtype == torch.float32 else "float64", v.shape[0], v.shape[1],
                v.stride(0), v.stride(1))
    for recipe, options, trainer, block, tiles in BLOCK_CASES:
        ok = total = 0
        first = ""
        kw = dict(o.split("=") for o in options.split(",") if o)
        for s in range(shapes):
            m, k = int(rng.integers(1, 300)), int(rng.integers(1, 600))
            x = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-20, 20, (m, k)))).astype(np.float32)
            x[rng.random((m, k)) < 0.01] = 0.0
            xd = torch.from_numpy(x).cuda()
            codes = torch.empty((m, k), dtype=torch.uint8, device="cuda")
            scales = torch.empty((m, k), dtype=torch.float32, device="cuda")
            core._cuda_block_quantize(recipe, options, desc(xd), float(np.max(np.abs(x))), scales=desc(scales),
                                      codes_ptr=codes.data_ptr(), stream=stream)
            q = rpsim.quantize(x, recipe, **kw)
            tr = block if tiles else 1
            want_scales = np.asarray(q["scales"], np.float32).reshape(-1, (k + block - 1) // block)
            want_scales = np.repeat(np.repeat(want_scales, tr, 0)[:m], block, 1)[:, :k]
            same = (codes.cpu().numpy() == q["codes"].reshape(m, k)) & \
                (scales.cpu().numpy().view(np.uint32) == want_scales.view(np.uint32))
            total, ok = total + same.size, ok + int(same.sum())
            if not first and not same.all():
                i, j = map(int, np.argwhere(~same)[0])
                first = f"{m}x{k} ({i},{j}): x {x[i, j]!r}"
            if trainer is None:
                continue
            values = torch.empty((m, k), dtype=torch.float64, device="cuda")
            core._cuda_block_quantize(recipe, options, desc(xd), float(np.max(np.abs(x))), values=desc(values),
                                      stream=stream, rounding="sr", seed=9, stream_id=s)
            want = core._torch_block_quantize(x.astype(np.float64), trainer[0], trainer[1], block, 1, tiles,
                                              (9, s))[0]
            same = values.cpu().numpy().view(np.uint64) == np.asarray(want, np.float64).view(np.uint64)
            total, ok = total + same.size, ok + int(same.sum())
            if not first and not same.all():
                i, j = map(int, np.argwhere(~same)[0])
                first = f"sr {m}x{k} ({i},{j}): x {x[i, j]!r} cpu {want[i, j]!r}"
        tally.add(f"block quantize {recipe} {options or 'defaults'}", ok, total, first)


def check_torch_quantize(torch, tally, n=1 << 16):
    """rpsim.torch.quantize on CUDA tensors (routed to rpsim_cuda_round) against the same call on the
    CPU: forward values and the gradient's backward rounding, float32 / float64 / bfloat16 / float16
    tensors, stochastic rounding included."""
    import rpsim.torch as rt
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        for fmt, mode, extra in (("binary16", "rne", {}), ("bfloat16", "sr", {"seed": 3, "stream": 9}),
                                 ("e4m3", "rne", {"saturate": True}), ("e5m2", "rtz", {"ftz": True}),
                                 ("e2m1", "sr", {"stochastic_bits": 8}), ("q8.7", "rna", {})):
            x = torch.from_numpy(inputs(n, 7, np.float64)).clamp(-1e30, 1e30).to(dtype)
            cpu = x.clone().requires_grad_()
            gpu = x.cuda().requires_grad_()
            kw = dict(extra, backward_format="e5m2", backward_rounding="sr")
            a, b = rt.quantize(cpu, fmt, mode, **kw), rt.quantize(gpu, fmt, mode, **kw)
            g = torch.linspace(-3, 3, n, dtype=dtype)
            a.backward(g)
            b.backward(g.cuda())
            same = (a.detach().view(-1) == b.detach().cpu().view(-1)) | (a.isnan() & b.cpu().isnan())
            same_g = (cpu.grad == gpu.grad.cpu()) | (cpu.grad.isnan() & gpu.grad.cpu().isnan())
            first = "" if bool(same.all()) else f"x={float(x[~same][0])}"
            tally.add(f"rpsim.torch.quantize {dtype} -> {fmt} {mode}", int(same.sum()) + int(same_g.sum()), 2 * n,
                      first)


def time_ms(torch, fn, repeats):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def check_speed(torch, core, size, repeats):
    n = size
    g = torch.Generator(device="cuda").manual_seed(5)
    a32 = torch.randn((n, n), device="cuda", generator=g)
    b32 = torch.randn((n, n), device="cuda", generator=g)
    a16, b16 = a32.half().float(), b32.half().float()  # binary16 values held in binary32 arrays
    d = torch.empty((n, n), device="cuda")
    stream = torch.cuda.current_stream().cuda_stream

    def desc(v):
        return (v.data_ptr(), "float32", v.shape[0], v.shape[1], v.stride(0), v.stride(1))
    free0 = torch.cuda.mem_get_info()[0]
    torch.cuda.reset_peak_memory_stats()
    sgemm = time_ms(torch, lambda: torch.matmul(a32, b32, out=d), repeats)
    sgemm_mem = torch.cuda.max_memory_allocated()
    emulated = time_ms(torch, lambda: core._cuda_gemm("tc:h100:fp16:fp32", desc(a16), desc(b16), None, desc(d),
                                                      stream), repeats)
    extra = free0 - torch.cuda.mem_get_info()[0]
    ratio = sgemm / emulated
    print(f"speed {n}^3: cuBLAS SGEMM (TF32 off) {sgemm:.2f} ms, emulated tc:h100:fp16:fp32 {emulated:.2f} ms: "
          f"{ratio:.4f} of SGEMM (aim >= 0.1); peak torch memory {sgemm_mem / 2**20:.0f} MiB, device memory "
          f"outside torch's allocator after the run {extra / 2**20:.0f} MiB", flush=True)
    others = {}
    for model in SPEED_MODELS:  # the other accumulation kinds training uses, once each (binary16 values)
        others[model] = time_ms(torch, lambda: core._cuda_gemm(model, desc(a16), desc(b16), None, desc(d), stream), 1)
        print(f"speed {n}^3: emulated {model} {others[model]:.2f} ms: {sgemm / others[model]:.4f} of SGEMM",
              flush=True)
    return {"size": n, "sgemm_ms": sgemm, "emulated_ms": emulated, "ratio": ratio, "aim": 0.1,
            "torch_peak_bytes": int(sgemm_mem), "outside_torch_bytes": int(extra), "other_models_ms": others}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--values", type=int, default=10**8, help="rounding inputs per format, mode and input type")
    p.add_argument("--chunk", type=int, default=1 << 24)
    p.add_argument("--shapes", type=int, default=20, help="random shapes per GEMM model")
    p.add_argument("--size", type=int, default=4096, help="the speed check's M = N = K")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="CPU threads of the reference (0: all)")
    p.add_argument("--quick", action="store_true", help="10^6 values, 3 shapes, 1024^3: a smoke run")
    p.add_argument("--out", default="results/gpu-backend")
    p.add_argument("--only", default="speed,gemm,block,torch,round", help="the checks to run, in this order")
    o = p.parse_args()
    if o.quick:
        o.values, o.chunk, o.shapes, o.size = 10**6, 1 << 20, 3, 1024
    torch, rpsim, core = setup()
    started = time.time()
    info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "architectures": core._cuda_architectures()}
    print(f"device {info['device']}, torch {info['torch']}, rpsim kernels for {info['architectures']}", flush=True)
    tally = Tally(pathlib.Path(o.out), info)
    steps = {"speed": lambda: info.update(speed=check_speed(torch, core, o.size, o.repeats)),
             "gemm": lambda: check_gemms(torch, rpsim, core, tally, o.shapes, o.threads),
             "block": lambda: check_block_quantize(torch, rpsim, core, tally, o.shapes),
             "torch": lambda: check_torch_quantize(torch, tally),
             "round": lambda: check_rounding(torch, rpsim, core, tally, min(o.values, 10**10),
                                             min(o.chunk, o.values), o.threads)}
    for name in o.only.split(","):
        try:  # one check's failure to run is a failed row, and the next still runs
            steps[name]()
        except Exception as e:  # noqa: BLE001 (reported and counted)
            tally.add(f"{name}: raised {type(e).__name__}: {e}", 0, 1)
        tally.write()
    passed = len(tally.rows) - tally.failed
    print(f"{passed} passed, {tally.failed} failed ({time.time() - started:.0f} s)")
    sys.exit(1 if tally.failed else 0)


if __name__ == "__main__":
    main()
