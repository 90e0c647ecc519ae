"""Writes sim/accumulation/tables/cublas-<gpu>.txt, the cuBLASLt heuristic table a cublas:<gpu> preset
reads (format: sim/accumulation/include/rpsim/accumulation/cublas_table.hpp): for every shape and kind
of sim/accumulation/tables/cublas-shapes.json, the algorithm cublasLtMatmulAlgoGetHeuristic ranks first,
its SPLITK_NUM and REDUCTION_SCHEME; and, with torch present, the kernel each distinct algorithm
configuration launches (one profiled cublasLtMatmul per configuration, at the first shape that chose it).

Runs on the GPU the table is for; needs libcublasLt (and torch for the kernel names); not rpsim.
The heuristic calls go through experiments/python/rpsim/torch/_cublaslt.py, loaded by path: one copy of
the ctypes plumbing, which capture_gemms uses too (it needs only the standard library).

Usage: python3 sim/accumulation/fit/cublas_heuristic_table.py GPU [--spec FILE] [--out FILE]
           [--kinds K1,K2] [--no-kernels] [--jobs J] [--deadline SECONDS]
       GPU is the preset's name (h100). --jobs: kinds asked in parallel worker processes (the table is
       the same); --deadline: kinds unanswered after that many seconds are left out, named. It prints the queries' count and time, the distinct
       configurations, the sha256 of the spec it read and of the table it wrote.
"""
import hashlib
import importlib.util
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
SPEC = os.path.join(ROOT, "sim", "accumulation", "tables", "cublas-shapes.json")


def load_cublaslt():
    """experiments/python/rpsim/torch/_cublaslt.py as a module of its own (the rpsim package needs a build)."""
    path = os.path.join(ROOT, "experiments", "python", "rpsim", "torch", "_cublaslt.py")
    spec = importlib.util.spec_from_file_location("rpsim_cublaslt", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def axis(a, name):
    """The spec's axis: `points` geometric values from..to, rounded to `multiple`, unique, increasing;
    with unaligned_offset, value + offset too."""
    for key in ("from", "to", "points", "multiple"):
        if not isinstance(a.get(key), int) or a[key] < 1:
            raise ValueError(f"cublas-shapes.json: axes.{name}.{key} must be a positive integer, not {a.get(key)!r}")
    lo, hi, n, mult = math.log(a["from"]), math.log(a["to"]), a["points"], a["multiple"]
    values = {max(mult, round(math.exp(lo + (hi - lo) * i / max(1, n - 1)) / mult) * mult) for i in range(n)}
    if "unaligned_offset" in a:
        values |= {v + a["unaligned_offset"] for v in list(values) if v + a["unaligned_offset"] > 0}
    return sorted(values)


def read_spec(path):
    with open(path, "rb") as f:
        raw = f.read()
    spec = json.loads(raw)
    if spec.get("version") != 1:
        raise ValueError(f"{path}: version {spec.get('version')!r}, this script reads version 1")
    axes = {name: axis(spec["axes"][name], name) for name in "mnk"}
    return spec, axes, hashlib.sha256(raw).hexdigest()


def run_length(cells):
    """Entries of one (m, n) row as `E` or `E*COUNT` tokens (runs of equal entries)."""
    out, i = [], 0
    while i < len(cells):
        j = i
        while j < len(cells) and cells[j] == cells[i]:
            j += 1
        out.append(cells[i] if j - i == 1 else f"{cells[i]}*{j - i}")
        i = j
    return " ".join(out)


def query_kind(job):
    """answer_kind in a worker process of its own, with its own cuBLASLt handle."""
    name, kind, axes, workspace = job
    cl = load_cublaslt()
    lt = cl.CublasLt()
    rows, first_shape = answer_kind(lt, cl, kind, axes, workspace)
    lt.close()
    return name, rows, first_shape


def answer_kind(lt, cl, kind, axes, workspace):
    """One kind's answers, per (m, n) the list over k of (configuration key, SPLITK_NUM, REDUCTION_SCHEME),
    None where cuBLASLt has no algorithm; and the first query that chose each configuration (the parent
    numbers the configurations: number_rows)."""
    rows, first_shape = [], {}
    for m in axes["m"]:
        for n in axes["n"]:
            cells = []
            for k in axes["k"]:
                q = cl.torch_query(m, n, k, kind["a"], kind["b"], kind["d"], b_transposed=kind.get("b_transposed", False),
                                   allow_tf32=kind.get("allow_tf32", False),
                                   reduced_precision_reduction=kind.get("rpr"), fast_accum=kind.get("fast_accum", False),
                                   workspace=workspace)
                try:
                    h = lt.heuristic(q)
                except cl.CublasLtError:
                    cells.append(None)
                    continue
                key = (h["algo_id"], h["tile_id"], h["stages_id"], h["custom_option"])
                first_shape.setdefault(key, q)
                cells.append((key, h["splitk_num"] or 1, h["reduction_scheme"] or 0))
            rows.append(cells)
    return rows, first_shape


def number_rows(rows, first, configs, first_shape):
    """A kind's rows as run-length text, configurations numbered in the order first seen (kinds in the
    spec's order, so the table is the same however many workers asked)."""
    out = []
    for cells in rows:
        text = []
        for cell in cells:
            if cell is None:
                text.append("0.0.0")
                continue
            key, splitk, reduction = cell
            if key not in configs:
                configs[key] = len(configs) + 1  # 0 is "no algorithm"
                first_shape[key] = first[key]
            text.append(f"{configs[key]}.{splitk}.{reduction}")
        out.append(run_length(text))
    return out


def query_all(kinds, axes, workspace, jobs, deadline):
    """{kind: (rows, first_shape)} for the kinds answered before the deadline (seconds from now; kinds
    still running then are left out and named on stderr). Workers are spawned, not forked: a CUDA
    context does not survive a fork."""
    import multiprocessing
    done, start = {}, time.time()
    todo = [(name, kind, axes, workspace) for name, kind in kinds.items()]
    with multiprocessing.get_context("spawn").Pool(max(1, min(jobs, len(todo)))) as pool:
        answers = pool.imap_unordered(query_kind, todo)
        for _ in todo:
            try:
                name, rows, first = answers.next(timeout=max(1.0, deadline - (time.time() - start)))
            except multiprocessing.TimeoutError:
                print(f"deadline: left out {', '.join(k for k in kinds if k not in done)}", file=sys.stderr)
                pool.terminate()
                break
            done[name] = (rows, first)
            print(f"{name}: {len(rows) * len(axes['k'])} shapes, {time.time() - start:.0f} s", file=sys.stderr)
    return done


def kernel_names(cl, lt, first_shape):
    """The kernel each configuration launches: its first shape run once, with the heuristic's own top
    algorithm, under the profiler (torch for device memory and the profiler). {} without torch."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        print("torch absent: the table names no kernels (the presets then read SPLITK_NUM alone)", file=sys.stderr)
        return {}
    names = {}
    for key, q in first_shape.items():
        def buffer(spec):
            size = spec["rows"] * spec["cols"] * (q["batch"] or 1) * cl.ELEMENT_BYTES[spec["type"]]
            return torch.zeros(max(size, 1), dtype=torch.uint8, device="cuda")
        bufs = {x: buffer(q[x]) for x in "abcd"}
        bufs["workspace"] = torch.empty(max(q["workspace"], 1), dtype=torch.uint8, device="cuda")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            lt.heuristic(q, run={x: t.data_ptr() for x, t in bufs.items()})
            torch.cuda.synchronize()
        # Kernels only: the profiler's averages also hold CUPTI's own entries ("Activity Buffer Request"),
        # which the first H200 table (2026-11-29) took for kernel names.
        ks = [e.key for e in prof.key_averages() if str(getattr(e, "device_type", "")).endswith("CUDA")
              and "splitKreduce" not in e.key and "reduce_1Block" not in e.key and "Activity" not in e.key]
        names[key] = ks[0] if ks else ""
    return names


def write(out, gpu, lib, spec_path, spec_hash, configs, names, tables, axes):
    lines = ["rpsim-cublas-table 1", f"gpu {gpu}", f"library {lib}",
             f"spec {os.path.relpath(spec_path, ROOT)} sha256 {spec_hash}",
             "config 0 algo=-1 tile=0 stages=0 custom=0 kernel="]
    for key, i in sorted(configs.items(), key=lambda x: x[1]):
        lines.append(f"config {i} algo={key[0]} tile={key[1]} stages={key[2]} custom={key[3]} "
                     f"kernel={names.get(key, '')}")
    for kind, rows in tables.items():
        lines += [f"kind {kind}"] + [f"{x} " + " ".join(map(str, axes[x])) for x in "mnk"] + rows
    lines.append("end")
    text = "\n".join(lines) + "\n"
    with open(out + ".tmp", "w") as f:
        f.write(text)
    os.replace(out + ".tmp", out)
    return hashlib.sha256(text.encode()).hexdigest()


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    gpu = argv[0]
    opt = {argv[i]: argv[i + 1] for i in range(1, len(argv) - 1) if argv[i].startswith("--")}
    spec_path = opt.get("--spec", SPEC)
    out = opt.get("--out", os.path.join(ROOT, "sim", "accumulation", "tables", f"cublas-{gpu}.txt"))
    spec, axes, spec_hash = read_spec(spec_path)
    kinds = spec["kinds"] if "--kinds" not in opt else {k: spec["kinds"][k] for k in opt["--kinds"].split(",")}
    cl = load_cublaslt()
    lt = cl.CublasLt()
    start = time.time()
    answered = query_all(kinds, axes, spec.get("workspace", cl.DEFAULT_WORKSPACE), int(opt.get("--jobs", 1)),
                         float(opt.get("--deadline", "inf")))
    configs, first_shape, tables = {}, {}, {}
    for name in kinds:
        if name in answered:
            tables[name] = number_rows(*answered[name], configs, first_shape)
    print(f"{len(tables)} of {len(kinds)} kinds in {time.time() - start:.0f} s", file=sys.stderr)
    names = {} if "--no-kernels" in argv else kernel_names(cl, lt, first_shape)
    device = os.environ.get("RPSIM_GPU_NAME", gpu)
    digest = write(out, device, f"{os.path.basename(lt.path)} {lt.version}", spec_path, spec_hash, configs, names,
                   tables, axes)
    print(f"{len(configs)} configurations; spec sha256 {spec_hash}; wrote {out} sha256 {digest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
