"""Write a GEMM your GPU computed as an .npz that `rpsim gemm-check` reads.

From your own code (PyTorch and NumPy on the GPU machine; rpsim itself needs
neither):

    import torch
    from dump_gemm import dump_gemm
    a = torch.randn(128, 4096, device="cuda").half()
    b = torch.randn(4096, 128, device="cuda").half()
    d = my_kernel(a, b)            # or a @ b, torch.mm(..., out_dtype=...), Triton, CUTLASS ...
    dump_gemm("mine.npz", a, b, d)  # then: rpsim gemm-check mine.npz --infer

A (M x K), B (K x N), D (M x N) and an optional C (M x N) may be torch tensors
or NumPy arrays. float16 is stored as float16; bfloat16, float8_e4m3fn,
float8_e5m2 and float32 as float32 (every value exactly); float64 as it is.
Give A and B as the kernel read them (for tf32 the float32 inputs, which the
tensor cores round themselves).

As a script it makes one cuBLAS dump the way shared/cublas-h100 was made:

    python3 dump_gemm.py --input fp16 --output fp16 --m 128 --n 128 --k 4096 out.npz
"""
import argparse
import os
import sys

import numpy as np

STORED = {"float16": np.float16, "bfloat16": np.float32, "float8_e4m3fn": np.float32,
          "float8_e5m2": np.float32, "float32": np.float32, "float64": np.float64}


def to_numpy(x):
    """An exact NumPy copy of a tensor or array (bf16 and fp8 widened to float32)."""
    if hasattr(x, "detach"):  # a torch tensor
        import torch
        name = str(x.dtype).replace("torch.", "")
        if name not in STORED:
            raise TypeError(f"dtype {x.dtype} is not one rpsim reads ({', '.join(STORED)})")
        x = x.detach().cpu()
        if STORED[name] is np.float32 and x.dtype != torch.float32:
            x = x.float()  # exact: bf16 and fp8 values are float32 values
        return x.numpy().astype(STORED[name], copy=False)
    x = np.asarray(x)
    if x.dtype not in (np.float16, np.float32, np.float64):
        raise TypeError(f"dtype {x.dtype} is not float16, float32 or float64")
    return x


def dump_gemm(path, a, b, d, c=None):
    """Save A, B, D (and C) to `path` (.npz), checking the shapes agree."""
    arrays = {"A": to_numpy(a), "B": to_numpy(b), "D": to_numpy(d)}
    if c is not None:
        arrays["C"] = to_numpy(c)
    m, k = arrays["A"].shape
    k2, n = arrays["B"].shape
    if k != k2 or arrays["D"].shape != (m, n) or ("C" in arrays and arrays["C"].shape != (m, n)):
        raise ValueError(f"shapes A {arrays['A'].shape}, B {arrays['B'].shape}, D {arrays['D'].shape} "
                         "do not make D = A @ B")
    np.savez_compressed(path, **arrays)


class DumpError(Exception):
    """What stops the script on this machine or with these arguments (exit 2, no traceback)."""


def set_matmul_flag(torch, name, value):
    """torch.backends.cuda.matmul.<name> = value; False when this torch has no such flag (torch 1.13
    has no allow_bf16_reduced_precision_reduction: its setattr raises AssertionError)."""
    try:
        setattr(torch.backends.cuda.matmul, name, value)
        return True
    except (AssertionError, AttributeError):
        return False


def check_torch(args):
    """torch, once everything the dump needs is there: PyTorch, a CUDA device, and for e4m3 inputs
    float8 and torch._scaled_mm. Every problem is named at once (DumpError)."""
    try:
        import torch
    except ImportError:
        raise DumpError("PyTorch is not installed: the dump runs on the GPU machine, with PyTorch and CUDA") from None
    problems = []
    if not torch.cuda.is_available():
        built = "built without CUDA" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        problems.append(f"no CUDA device: torch {torch.__version__} ({built}) sees none; run it on the GPU "
                        "machine (rpsim gemm-check then reads the .npz anywhere)")
    if args.input == "e4m3" and not (hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")):
        problems.append(f"--input e4m3 needs torch.float8_e4m3fn and torch._scaled_mm (PyTorch 2.1 or later); "
                        f"this is torch {torch.__version__}")
    if problems:
        raise DumpError("; ".join(problems))
    return torch


def cublas_dump(args):
    """One torch.matmul / torch._scaled_mm call as in shared/cublas-h100."""
    torch = check_torch(args)
    for name in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if not set_matmul_flag(torch, name, bool(args.rpr)) and args.rpr and args.input in name:
            raise DumpError(f"--rpr 1: torch {torch.__version__} has no torch.backends.cuda.matmul.{name}")
    torch.backends.cuda.matmul.allow_tf32 = args.input == "tf32"
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    a = torch.randn(args.m, args.k, device="cuda", generator=g)
    b = torch.randn(args.k, args.n, device="cuda", generator=g)
    out = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[args.output]
    if args.input == "e4m3":
        a, b = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        d = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=out)
    else:
        cast = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[args.input]
        a, b = a.to(cast), b.to(cast)
        try:
            d = torch.mm(a, b, out_dtype=out) if out != cast else a @ b
        except TypeError:
            raise DumpError(f"--input {args.input} --output {args.output}: torch {torch.__version__} has no "
                            "torch.mm(..., out_dtype=); give --output the input's format") from None
    torch.cuda.synchronize()
    dump_gemm(args.out, a, b, d)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="the .npz to write")
    p.add_argument("--input", choices=["fp16", "bf16", "tf32", "e4m3"], default="fp16")
    p.add_argument("--output", choices=["fp16", "bf16", "fp32"], default="fp32")
    p.add_argument("--m", type=int, default=128)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--rpr", type=int, choices=[0, 1], default=0,
                   help="allow_{fp16,bf16}_reduced_precision_reduction")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name in ("m", "n", "k"):
        if getattr(args, name) < 1:
            p.error(f"--{name} {getattr(args, name)}: must be at least 1")
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        p.error(f"{args.out}: the folder {folder} does not exist")
    try:
        cublas_dump(args)
    except DumpError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: A {args.m}x{args.k}, B {args.k}x{args.n} ({args.input}), D ({args.output}); "
          f"then: rpsim gemm-check {args.out} --infer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
