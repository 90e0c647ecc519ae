"""Writes sim/accumulation/src/cublas_h100_grid.hpp: the split-K slices cuBLAS chose on an H100 for
each shape of a GEMM shape grid, per input kind (fp16, bf16, tf32).

The captures it reads (NAME.json + NAME.npz in CAPTURE_DIR) are not in the repository (4.5 MB of D blocks
plus the kernel lists; an excerpt is tests/data/cublas-h100-grid). Regenerate them on an H100 with
    python3 sim/accumulation/fit/cublas_grid_capture.py CAPTURE_DIR            (grid.json/.npz, ~10 min)
    python3 sim/accumulation/fit/cublas_grid_capture.py CAPTURE_DIR --rand 800 (rand.json/.npz)
(torch with CUDA; no rpsim). Their format: NAME.json {"cases": [{"i", "variant", "m", "n", "k", "blocks":
[[row, col] x 3], "kernels": [{"name", "grid"}...]}...]}, NAME.npz d{i}: the three 8x8 blocks of D
(float32); A, B and the bias are the index hash below, salts 1000003 i + 17, + 500009, + 900007.

The slices come from the kernels each GEMM launched, checked against D: cutlass_80 split-K kernels
(tf32) run grid.z slices of their k-tile (16 or 32), sm90_xmma kernels with segment-K off and nvjet
kernels without "splitK" one chain; nvjet splitK kernels and segment-K on kernels do not show the
slice count (persistent grids), so it is searched: the (split_k, split_tile) reproducing all three
stored 8x8 blocks of D bit for bit. A shape where nothing reproduces D is '?' (not in the table).
Further captures at shapes off the grid (--off-grid rand) are searched the same way and written as a
list the preset searches with the grid (kOff*).

The arithmetic is rpsim's, through build/sim/cublas_fit_eval (a child process reading one block request
a line; sim/accumulation/fit/cublas_fit_eval.cpp): the script imports no rpsim module.

Usage: python3 sim/accumulation/fit/cublas_h100_grid.py CAPTURE_DIR [OUT.hpp] [--off-grid rand]
           [--eval build/sim/cublas_fit_eval] [--check]
       then clang-format -i OUT.hpp (the committed file is formatted). About 5 minutes on 2 cores; it
       prints the cross-validation counts the preset's comment quotes (leave-one-out on the grid and on
       grid + off-grid, grid -> off-grid) and the sha256 of what it wrote. --check writes to a
       temporary file, clang-formats it and compares it with the committed header byte for byte
       (exit 1 on a difference), so a regenerated capture can be checked against the table in use.
"""
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

PBITS = {"tf32": 23, "fp16": 10, "bf16": 7, "e4m3": 3}
MASK, HMUL = 0xFFFFFFFF, 0x45D9F3B
# the variants whose D decides each kind's slices (their kernels match at every shape): fp16 -> fp16 and
# fp16 -> fp32 launch the same kernels, bf16 differs from fp16 at 5 shapes. Two variants of a kind are two
# independent input draws, so a slicing that fits one by chance (bf16's short mantissas) is caught.
KINDS = {"fp16": ("fp16_fp32", "fp16_fp16_red1"), "bf16": ("bf16_bf16_red1", "bf16_bf16_red0"),
         "tf32": ("tf32_fp32",)}
SPEC = {"fp16_fp32": "kernel:h100:binary16:binary32", "fp16_fp16_red1": "kernel:h100:binary16:binary16",
        "bf16_bf16_red1": "kernel:h100:bfloat16:bfloat16", "bf16_bf16_red0": "kernel:h100:bfloat16:bfloat16",
        "tf32_fp32": "kernel:h100:tf32:binary32:stored=binary32"}
DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+*@"  # split count 1..64


class Evaluator:
    """The blocks of D a schedule gives, from build/sim/cublas_fit_eval (one request a line). tables: the
    folder a cublas: preset reads its heuristic table from (RPSIM_CUBLAS_TABLES; None: the process's own);
    cublas_heldout_eval.py shares this class."""

    def __init__(self, path, tables=None):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: build it (ninja -C build cublas_fit_eval) or give --eval PATH")
        env = None if tables is None else dict(os.environ, RPSIM_CUBLAS_TABLES=tables)
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     env=env)

    def block(self, rec, r, c, spec, bias=False):
        return self.block_and_source(rec, r, c, spec, bias)[0]

    def block_and_source(self, rec, r, c, spec, bias=False, record=None):
        """The 8x8 block at (r, c) and, for a preset, where its schedule came from ("recorded: ...");
        record: a {"cublas": {...}} capture record the preset reads the schedule from."""
        i = rec["i"]
        p = PBITS[rec["variant"].split("_")[0]]
        self.proc.stdin.write(f"{p} {1_000_003 * i + 17} {1_000_003 * i + 500_009} {1_000_003 * i + 900_007} "
                              f"{rec['m']} {rec['n']} {rec['k']} {r} {c} {int(bias)} {spec}"
                              + (" " + json.dumps(record) if record else "") + "\n")
        line = self.proc.stdout.readline()
        if line.startswith("error"):
            raise RuntimeError(f"cublas_fit_eval: {line.strip()} (spec {spec}, case {i})")
        values, _, source = line.partition(" # ")
        return np.array(values.split(), dtype=np.uint32).reshape(8, 8), source.strip()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


EVAL = None  # the Evaluator main() starts


def exact(rec, d3, spec, bias=False):
    """True when spec reproduces all three stored blocks bit for bit."""
    for (r, c), d in zip(rec["blocks"], d3):
        if not np.array_equal(EVAL.block(rec, r, c, spec, bias), d.astype(np.float32).view(np.uint32)):
            return False
    return True


def with_split(base, s, t):
    return base + (f":split_k={s}" if s > 1 else "") + f":split_tile={t}"


def kernel_hint(rec):
    """(split_k, k-tile, searched?) from the GEMM's main kernel."""
    main = [x for x in rec["kernels"] if "splitKreduce" not in x["name"]][0]
    name, grid = main["name"], main["grid"]
    if "cutlass" in name:
        return grid[2], int(re.search(r"_(\d+)x(\d+)_(\d+)x(\d+)_", name).group(3)), False
    if "segment_k_on" in name:
        return 1, 32, True
    if name.startswith("nvjet"):
        return 1, 64, "splitK" in name
    return grid[2], 32, False


def kernel_key(rec):
    """The main kernel without its type letters (nvjet_sm90_hss_ / _tst_ ...) and its grid."""
    main = [x for x in rec["kernels"] if "splitKreduce" not in x["name"]][0]
    return re.sub(r"^nvjet_sm90_[a-z]+_", "", main["name"]), tuple(main["grid"])


def slices(recs, blocks, same_kernel_as=None):
    """The slices reproducing D of every record (one shape, the kind's variants), searched in the
    order: the kernel's own (grid.z x k-tile), then 1..32 slices of its k-tile or the other one.
    same_kernel_as: the slices of a GEMM that launched the same kernel and grid (bf16 -> fp16's),
    taken when they fit: bf16's short mantissas and output let several slicings give the same D."""
    def fits(s, t):
        return all(exact(r, blocks[f"d{r['i']}"], with_split(SPEC[r["variant"]], s, t)) for r in recs)
    if same_kernel_as and fits(*same_kernel_as):
        return same_kernel_as
    s0, t0, search = kernel_hint(recs[0])
    if not search:
        return (s0, t0) if fits(s0, t0) else None
    for s in list(range(1, 17)) + [18, 20, 22, 24, 28, 32]:
        for t in (t0, 32 if t0 == 64 else 64):
            if s * t <= recs[0]["k"] and fits(s, t):
                return s, t
    return None


def capture(cap_dir, name):
    """The records of one capture (NAME.json + NAME.npz in cap_dir) by (variant, M, N, K), and its D blocks."""
    by_shape = {}
    for rec in json.load(open(f"{cap_dir}/{name}.json"))["cases"]:
        by_shape.setdefault((rec["variant"], rec["m"], rec["n"], rec["k"]), rec)
    return by_shape, np.load(f"{cap_dir}/{name}.npz")


def search_shapes(by_shape, blocks, shapes):
    """{(kind, M, N, K): (split_k, k-tile) or None} over the given shapes, every kind whose variants the
    capture holds (the rand capture has one bf16 draw: bf16_bf16_red1)."""
    table = {}
    for kind, variants in KINDS.items():
        for m, n, k in shapes:
            recs = [by_shape[v, m, n, k] for v in variants if (v, m, n, k) in by_shape]
            ref = by_shape["fp16_fp32", m, n, k]
            same = kind == "bf16" and kernel_key(recs[0]) == kernel_key(ref)
            found = slices(recs, blocks, table["fp16", m, n, k] if same else None)
            # the table holds fp16/bf16 counts of 64-k tiles only: a fit with 32-k tiles (rand's bf16
            # 528x176x9504, 3 x 32, its own kernel) is not what the preset would run there
            table[kind, m, n, k] = None if found and kind != "tf32" and found[1] != 64 else found
        print(kind, "shapes without a reproducing schedule:",
              sum(1 for key, v in table.items() if key[0] == kind and v is None), file=sys.stderr)
    return table


COMMITTED = "sim/accumulation/src/cublas_h100_grid.hpp"


def main():
    """GRID_DIR [OUT.hpp] [--off-grid NAME ...] [--eval PATH] [--check]: the grid (grid.json/.npz) and
    further captures in GRID_DIR at shapes off the grid (rand.json/.npz), whose rows the preset searches
    with the grid's."""
    global EVAL
    args = sys.argv[1:]
    valued = ("--off-grid", "--eval")
    extra = [args[i + 1] for i, a in enumerate(args) if a == "--off-grid"]
    opts = {a: args[i + 1] for i, a in enumerate(args) if a in valued and i + 1 < len(args)}
    pos = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] not in valued)]
    if not pos:
        sys.exit(__doc__)
    grid_dir = pos[0]
    check = "--check" in args
    out = tempfile.mktemp(suffix=".hpp") if check else pos[1] if len(pos) > 1 else COMMITTED
    EVAL = Evaluator(opts.get("--eval", "build/sim/cublas_fit_eval"))
    by_shape, blocks = capture(grid_dir, "grid")
    ms = sorted({key[1] for key in by_shape})
    ns = sorted({key[2] for key in by_shape})
    ks = sorted({key[3] for key in by_shape if key[0] == "tf32_fp32"})
    table = search_shapes(by_shape, blocks, [(m, n, k) for m in ms for n in ns for k in ks])
    off = {}
    for name in extra:
        rb, rblocks = capture(grid_dir, name)
        off.update(search_shapes(rb, rblocks, sorted({key[1:] for key in rb})))
    write(out, ms, ns, ks, table, off)
    report(out, check)
    for kind, w in (("fp16", 2.0), ("bf16", 2.0), ("tf32", 1.0)):
        grid_rows = rows_of(table, kind)
        off_rows = [r for r in rows_of(off, kind) if r[0] not in dict(grid_rows)]
        ok, total = cross_check(grid_rows, grid_rows, kind, w)
        print(f"{kind}: leave-one-out on the grid (K weight {w}): {ok} of {total} slice sets", file=sys.stderr)
        if off_rows:
            ok, total = cross_check(grid_rows, off_rows, kind, w)
            print(f"{kind}: fit on the grid, guess the off-grid shapes: {ok} of {total}", file=sys.stderr)
            ok, total = cross_check(grid_rows + off_rows, grid_rows + off_rows, kind, w)
            print(f"{kind}: leave-one-out on grid + off-grid: {ok} of {total}", file=sys.stderr)


def report(out, check):
    """The sha256 of what was written; with --check, clang-formatted and compared with the committed header."""
    if check:
        subprocess.run(["clang-format", "-i", out], check=True)
    with open(out, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    print(f"wrote {out}: sha256 {got}", file=sys.stderr)
    if not check:
        return
    with open(COMMITTED, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    os.unlink(out)
    print(f"committed {COMMITTED}: sha256 {want}", file=sys.stderr)
    if got != want:
        sys.exit("the regenerated table differs from the committed one")


def chunk_ends(k, s, t):
    """Where the slices end (kernel_schedule.hpp's rule: ceil(ceil(K/t)/s) tiles each, the last shorter)."""
    per = math.ceil(math.ceil(k / t) / s) * t
    return tuple(min(k, e) for e in range(per, k + per, per))


def k_rule(k):
    """The most slices nvjet splitK cuts K into: each keeps more than 20 k-tiles of 64. Every fp16/bf16 slice
    count measured (grid and rand, 2984 GEMMs) is at most this; equal in 991 of 1492 fp16 shapes, fewer where
    the output tiles fill the 132 SMs or the kernel is not a splitK one."""
    return max(1, math.ceil(math.ceil(k / 64) / 20) - 1)


def guess(rows, kind, m, n, k, wk):
    """The preset's guess at an unmeasured shape (kernel_presets.cpp grid_split): the nearest measured shape in
    |dlog2 M| + |dlog2 N| + wk |dlog2 K|, ties to the first; fp16/bf16 move its count along K by k_rule:
    a neighbour at its K's rule count gives this K's rule count, one below it (capped by its output) keeps
    its count, at most this K's rule count."""
    best = None
    for (m2, n2, k2), v2 in rows:
        if (m2, n2, k2) == (m, n, k):
            continue
        d = abs(math.log2(m2 / m)) + abs(math.log2(n2 / n)) + wk * abs(math.log2(k2 / k))
        if best is None or d < best[0]:
            best = (d, v2, k2)
    (s, t), k2 = best[1], best[2]
    if kind != "tf32":
        s = k_rule(k) if s == k_rule(k2) else min(s, k_rule(k))
    return max(1, min(s, math.ceil(k / t))), t


def rows_of(table, kind):
    return [(key[1:], v) for key, v in table.items() if key[0] == kind and v is not None]


def cross_check(train, test, kind, wk):
    """How many test shapes the guess from train (the shape itself left out) gets the slices of right."""
    ok = sum(chunk_ends(k, *guess(train, kind, m, n, k, wk)) == chunk_ends(k, *v) for (m, n, k), v in test)
    return ok, len(test)


def write(out, ms, ns, ks, table, off):
    lines = ["// Generated by sim/accumulation/fit/cublas_h100_grid.py from the H100 shape grid (session 10:",
             "// torch 2.11 + cuBLAS 13, H100 80GB HBM3); do not edit. Per input kind and M, one string per",
             "// N of one character per K: the split-K slice count (1-9, A=10, a=36, +*@ 62-64;",
             "// ? = no schedule reproduced D); tf32 also the k-tile of the slices per shape (s: 16, else 32).",
             "#pragma once", "", "namespace rpsim::sim::cublas_h100_grid {", "",
             f"constexpr long kM[] = {{{', '.join(map(str, ms))}}};",
             f"constexpr long kN[] = {{{', '.join(map(str, ns))}}};",
             f"constexpr long kK[] = {{{', '.join(map(str, ks))}}};", ""]
    for kind in KINDS:
        lines.append(f"// {kind}: [M][N], one character per K")
        lines.append(f"constexpr const char* k{kind.capitalize()}[{len(ms)}][{len(ns)}] = {{")
        for m in ms:
            cells = []
            for n in ns:
                v = [table.get((kind, m, n, k)) for k in ks]
                cells.append('"' + "".join("?" if x is None else DIGITS[x[0]] for x in v) + '"')
            lines.append(f"    {{{', '.join(cells)}}},")
        lines.append("};")
    lines.append("// tf32 k-tile: [M][N] -> per K 's' (16) or '.' (32)")
    lines.append(f"constexpr const char* kTf32Tile[{len(ms)}][{len(ns)}] = {{")
    for m in ms:
        cells = []
        for n in ns:
            v = [table.get(("tf32", m, n, k)) for k in ks]
            cells.append('"' + "".join("s" if x is not None and x[1] == 16 else "." for x in v) + '"')
        lines.append(f"    {{{', '.join(cells)}}},")
    lines += ["};", ""] + write_off(off) + ["}  // namespace rpsim::sim::cublas_h100_grid", ""]
    with open(out + ".tmp", "w") as f:
        f.write("\n".join(lines))
    import os
    os.replace(out + ".tmp", out)


def write_off(off):
    """The off-grid shapes as parallel arrays: M, N, K, then per kind one character per shape (as above)."""
    shapes = sorted({key[1:] for key in off})
    lines = [f"// Shapes off the grid ({len(shapes)}, the rand capture): M, N, K and per kind one character per shape",
             "// (as above; tf32's k-tile in kOffTf32Tile). The preset searches them with the grid's shapes."]
    for name, col in (("kOffM", 0), ("kOffN", 1), ("kOffK", 2)):
        vals = [str(x[col]) for x in shapes]
        lines.append(f"constexpr long {name}[] = {{")
        lines += ["    " + ", ".join(vals[i:i + 16]) + "," for i in range(0, len(vals), 16)]
        lines.append("};")
    cols = {kind: "".join("?" if off.get((kind, *x)) is None else DIGITS[off[kind, *x][0]] for x in shapes)
            for kind in KINDS}
    cols["tf32Tile"] = "".join("s" if off.get(("tf32", *x)) and off["tf32", *x][1] == 16 else "." for x in shapes)
    for kind, text in cols.items():
        lines.append(f"constexpr const char* kOff{kind[0].upper() + kind[1:]} =")
        lines += [f'    "{text[i:i + 80]}"' for i in range(0, len(text), 80)]
        lines[-1] += ";"
    return lines + [""]


if __name__ == "__main__":
    main()
