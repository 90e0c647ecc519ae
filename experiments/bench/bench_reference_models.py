#!/usr/bin/env python3
"""rpsim's Tensor Core instruction model against the two reference models users choose between:
Microsoft's MMA-Sim (Python, arXiv 2511.10909) and the MATLAB tensor-core models of Fasi, Higham,
Mikaitis and Pranesh (2021) / Khattak and Mikaitis (north-numerical-computing/MATLAB-tensor-core),
run under GNU Octave. The same dot products of one instruction go through each; the result bits
are compared with rpsim's and the time is printed as a ratio to rpsim's, in one run.

Benchmark only: neither reference is part of rpsim. Both are fetched outside the repository and
named at run time; an absent one is reported as absent and its row is left out.

  MMASIM_DIR     an MMA-Sim checkout (the folder holding the `mmasim` package)
  MMASIM_TOOLS   the harness that runs MMA-Sim one element at a time from bit patterns, with its
                 numpy stand-in for torch >= 2.7 (default: ../shared/mma-sim/tools beside the
                 repository, or $RPSIM_SHARED_DIR/mma-sim/tools)
  MATLAB_TC_DIR  a MATLAB-tensor-core checkout (models/ and models/tools/)
  OCTAVE         the Octave binary (default: octave on PATH; Debian: apt-get install octave)

  PYTHONPATH=build/python /usr/bin/python3 experiments/bench/bench_reference_models.py [--count N]

MMA-Sim runs on NumPy and the MATLAB models on Octave, both of which call the libblas.so.3 this
process maps: it is stated, and on the reference BLAS the ratios are refused unless
--allow-reference-blas (bench_blas.py), as users run both on an optimised one.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import bench_blas

# One row per instruction: rpsim's model spec, MMA-Sim's (arch, family, qualifier), the MATLAB
# model and its format names, K and the numpy types of the operands and of C / D.
INSTRUCTIONS = {
    "h100-fp16-fp32": dict(rpsim="tc:h100:fp16:fp32", mmasim=("Hopper", "mma", "m16n8k16.f32.f16.f16.f32"),
                           matlab=("H100TC", "fp16", "fp32"), k=16, ab=np.float16, cd=np.float32),
    "a100-fp16-fp32": dict(rpsim="tc:a100:fp16:fp32", mmasim=("Ampere", "mma", "m16n8k16.f32.f16.f16.f32"),
                           matlab=("A100TC", "fp16", "fp32"), k=16, ab=np.float16, cd=np.float32),
    "h100-bf16-fp32": dict(rpsim="tc:h100:bf16:fp32", mmasim=("Hopper", "mma", "m16n8k16.f32.bf16.bf16.f32"),
                           matlab=("H100TC", "bf16", "fp32"), k=16, ab=None, cd=np.float32),
}

ROOT = Path(__file__).resolve().parents[2]
# One thread for rpsim as for the references (MMA-Sim and Octave run one): set before rpsim's
# OpenMP runtime starts, or each tiny GEMM pays a parallel region.
os.environ["OMP_NUM_THREADS"] = "1"


def bf16_round(x):
    """float64 -> nearest-even bfloat16 values (as float32), finite inputs."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32)


def make_cases(row, count, seed):
    """Operands spread over 2^-8..2^8 times a normal draw (products of every sign and many
    alignments), C from the same draw times 4: ordinary data, no overflow."""
    rng = np.random.default_rng(seed)
    k = row["k"]

    def draw(shape):
        return rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, shape))

    cast = (lambda v: v.astype(row["ab"])) if row["ab"] is not None else bf16_round
    a = cast(draw((count, k))).astype(np.float64)
    b = cast(draw((count, k))).astype(np.float64)
    c = (draw(count) * 4).astype(row["cd"]).astype(np.float64)
    return a, b, c


def bits(values, dtype):
    v = np.asarray(values, np.float64).astype(dtype)
    return v.view(np.uint32 if dtype == np.float32 else np.uint16).astype(np.uint64)


def run_rpsim(row, a, b, c):
    import rpsim
    from rpsim import _core

    n, k = a.shape
    A, B, C = a.reshape(n, 1, k), b.reshape(n, k, 1), c.reshape(n, 1, 1)
    _core._torch_gemm(A[:10], B[:10], C[:10], row["rpsim"])  # warm: the model spec parsed once
    t0 = time.perf_counter()
    d = _core._torch_gemm(A, B, C, row["rpsim"]).reshape(n)
    batched = time.perf_counter() - t0
    # The public call per dot product, as a user looping in Python pays it.
    m = min(n, 2000)
    t0 = time.perf_counter()
    for i in range(m):
        rpsim.gemm(a[i:i + 1], b[i].reshape(k, 1), c[i:i + 1].reshape(1, 1), model=row["rpsim"], threads=1)
    per_call = (time.perf_counter() - t0) / m * n
    return d, batched, per_call


MMASIM_WORKER = r"""
import sys, time
import numpy as np
from mmasim_oracle import Spec, single_element_inst, run_case
from mmasim.simulator.nv_ptx import mma
arch, family, qual, path = sys.argv[1:5]
data = np.load(path)
a, b, c = data["a"], data["b"], data["c"]
spec = Spec(arch, family, qual, mma)
inst = single_element_inst(spec)
t0 = time.perf_counter()
out = [run_case(spec, inst, [int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i])) for i in range(len(c))]
print(time.perf_counter() - t0)
print(" ".join("%x" % x for x in out))
"""


def mmasim_paths():
    src = os.environ.get("MMASIM_DIR")
    tools = os.environ.get("MMASIM_TOOLS")
    if not tools:
        shared = os.environ.get("RPSIM_SHARED_DIR", str(ROOT.parent / "shared"))
        tools = str(Path(shared) / "mma-sim" / "tools")
    if not src or not (Path(src) / "mmasim").is_dir():
        return None, f"MMA-Sim absent: set MMASIM_DIR to a checkout holding mmasim/ (MMASIM_DIR={src!r})"
    if not (Path(tools) / "mmasim_oracle.py").is_file() or not (Path(tools) / "torchshim").is_dir():
        return None, f"MMA-Sim harness absent: {tools} has no mmasim_oracle.py and torchshim/ (set MMASIM_TOOLS)"
    return (src, tools), None


def run_mmasim(row, a, b, c, paths, tmp):
    src, tools = paths
    ab_bits = bits(a, row["ab"] or np.float32)
    if row["ab"] is None:  # bfloat16: the top half of binary32
        ab_bits = ab_bits >> 16
    bb_bits = bits(b, row["ab"] or np.float32)
    if row["ab"] is None:
        bb_bits = bb_bits >> 16
    path = Path(tmp) / "cases.npz"
    np.savez(path, a=ab_bits, b=bb_bits, c=bits(c, row["cd"]))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(tools) / "torchshim"), src, tools]))
    r = subprocess.run([sys.executable, "-c", MMASIM_WORKER, *row["mmasim"], str(path)], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"MMA-Sim failed:\n{r.stderr[-2000:]}")
    lines = r.stdout.strip().splitlines()
    return np.array([int(x, 16) for x in lines[1].split()], np.uint64), float(lines[0])


OCTAVE_SCRIPT = """
addpath('{dir}/models'); addpath('{dir}/models/tools');
x = load('-ascii', '{cases}'); k = {k}; n = rows(x);
A = x(:, 1:k); B = x(:, k+1:2*k); C = x(:, 2*k+1);
D = zeros(n, 1);
t0 = tic;
for i = 1:n
  D(i) = {fn}(1, A(i, :), B(i, :).', 1, C(i), '{informat}', '{outformat}');
end
t = toc(t0);
f = fopen('{out}', 'w'); fprintf(f, '%.17g\\n', t); fprintf(f, '%08x\\n', typecast(single(D), 'uint32')); fclose(f);
"""


def octave_paths():
    tc = os.environ.get("MATLAB_TC_DIR")
    octave = os.environ.get("OCTAVE") or shutil.which("octave")
    if not octave:
        return None, "Octave absent: apt-get install octave, or set OCTAVE to the binary"
    if not tc or not (Path(tc) / "models" / "tools" / "GEMM.m").is_file():
        return None, f"MATLAB tensor-core models absent: set MATLAB_TC_DIR to a checkout with models/tools (MATLAB_TC_DIR={tc!r})"
    return (tc, octave), None


def run_octave(row, a, b, c, paths, tmp):
    tc, octave = paths
    fn, informat, outformat = row["matlab"]
    cases, out = Path(tmp) / "cases.txt", Path(tmp) / "octave_out.txt"
    np.savetxt(cases, np.hstack([a, b, c.reshape(-1, 1)]), fmt="%.17g")
    script = Path(tmp) / "run_tc.m"
    script.write_text(OCTAVE_SCRIPT.format(dir=tc, cases=cases, k=row["k"], fn=fn, informat=informat,
                                           outformat=outformat, out=out))
    # The models print a note per call (no CPFloat: inputs are already in their formats): discarded.
    r = subprocess.run([octave, "--no-gui", "--quiet", "--no-window-system", str(script)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not out.is_file():
        raise SystemExit(f"Octave failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    lines = out.read_text().split()
    return np.array([int(x, 16) for x in lines[1:]], np.uint64), float(lines[0])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--instruction", default="h100-fp16-fp32", choices=sorted(INSTRUCTIONS))
    p.add_argument("--count", type=int, default=10000, help="dot products (default 10^4)")
    p.add_argument("--seed", type=int, default=1)
    bench_blas.add_argument(p)
    args = p.parse_args()
    if args.count < 1:
        p.error(f"--count: must be at least 1, got {args.count}")
    bench_blas.check(args.allow_reference_blas, numpy=np)
    row = INSTRUCTIONS[args.instruction]
    a, b, c = make_cases(row, args.count, args.seed)
    d, t_rpsim, t_call = run_rpsim(row, a, b, c)
    ref = bits(d, row["cd"])
    print(f"{args.count} dot products of {args.instruction} (K = {row['k']}, C loaded), one thread each\n")
    print("| model | s | dot products/s | time / rpsim | bits equal to rpsim |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| rpsim {row['rpsim']} (batched) | {t_rpsim:.4f} | {args.count / t_rpsim:.3g} | 1 | - |")
    print(f"| rpsim.gemm, one call per dot product | {t_call:.3f} | {args.count / t_call:.3g} | "
          f"{t_call / t_rpsim:.0f} | - |")
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, probe, run in (("MMA-Sim " + ".".join(row["mmasim"][:2]) + " " + row["mmasim"][2], mmasim_paths, run_mmasim),
                                 ("MATLAB " + row["matlab"][0] + " (Octave)", octave_paths, run_octave)):
            paths, absent = probe()
            if absent:
                notes.append(absent)
                continue
            got, t = run(row, a, b, c, paths, tmp)
            equal = int(np.sum(got == ref))
            print(f"| {name} | {t:.2f} | {args.count / t:.3g} | {t / t_rpsim:.0f} | {equal}/{args.count} |", flush=True)
            for i in np.flatnonzero(got != ref)[:3]:
                notes.append(f"{name} differs at case {i}: rpsim {int(ref[i]):x}, reference {int(got[i]):x}")
    for n in notes:
        print(n)


if __name__ == "__main__":
    main()
