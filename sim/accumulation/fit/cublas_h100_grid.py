"""Writes sim/accumulation/src/cublas_h100_grid.hpp: the split-K slices cuBLAS chose on an H100 for
each shape of a GEMM shape grid (the capture made by the lead's grid.py: grid.json + grid.npz, inputs
regenerated from their index hash), per input kind (fp16, bf16, tf32).

The slices come from the kernels each GEMM launched, checked against D: cutlass_80 split-K kernels
(tf32) run grid.z slices of their k-tile (16 or 32), sm90_xmma kernels with segment-K off and nvjet
kernels without "splitK" one chain; nvjet splitK kernels and segment-K on kernels do not show the
slice count (persistent grids), so it is searched: the (split_k, split_tile) reproducing all three
stored 8x8 blocks of D bit for bit. A shape where nothing reproduces D is '?' (not in the table).
Further captures at shapes off the grid (--off-grid rand: rand.json + rand.npz, 800 random shapes, same
hash) are searched the same way and written as a list the preset searches with the grid (kOff*).

Usage: PYTHONPATH=build/python python3 sim/accumulation/fit/cublas_h100_grid.py GRID_DIR [OUT.hpp] [--off-grid rand]
       then clang-format -i OUT.hpp (the committed file is formatted). About 5 minutes on 2 cores;
       it prints the cross-validation counts the preset's comment quotes
       (leave-one-out on the grid and on grid + off-grid, grid -> off-grid).
"""
import json
import math
import re
import sys

import numpy as np

import rpsim

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


def hashed(idx, salt, p):
    """grid.py's hashed(): the value at flat index idx, exact in float64."""
    h = (idx.astype(np.int64) + salt) & MASK
    h = (((h >> 16) ^ h) * HMUL) & MASK
    h = (((h >> 16) ^ h) * HMUL) & MASK
    h = (h >> 16) ^ h
    mant = (h & ((1 << p) - 1)) + (1 << p)
    e = ((h >> p) % 5) - 3 - p
    s = 1 - 2 * ((h >> 31) & 1)
    return np.ldexp((s * mant).astype(np.float64), e.astype(np.int64))


def block_inputs(rec, r, c):
    """Rows r..r+8 of A, columns c..c+8 of B and bias[c..c+8] of grid case rec."""
    m, n, k, i = rec["m"], rec["n"], rec["k"], rec["i"]
    p = PBITS[rec["variant"].split("_")[0]]
    sa, sb, sc = 1_000_003 * i + 17, 1_000_003 * i + 500_009, 1_000_003 * i + 900_007
    a = hashed(np.arange(r, r + 8)[:, None] * k + np.arange(k)[None, :], sa, p)
    b = hashed(np.arange(k)[:, None] * n + np.arange(c, c + 8)[None, :], sb, p)
    return a, b, hashed(np.arange(c, c + 8), sc, p)


def exact(rec, d3, spec, bias=False):
    """True when spec reproduces all three stored blocks bit for bit."""
    for (r, c), d in zip(rec["blocks"], d3):
        a, b, bv = block_inputs(rec, r, c)
        cm = np.broadcast_to(bv[None, :], (8, 8)).copy() if bias else None
        got = rpsim.gemm(a, b, cm, model=spec).astype(np.float32)
        if not np.array_equal(got.view(np.uint32), d.astype(np.float32).view(np.uint32)):
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


def main():
    """GRID_DIR [OUT.hpp] [--off-grid NAME ...]: the grid (grid.json/.npz) and further captures in GRID_DIR
    at shapes off the grid (rand.json/.npz), whose rows the preset searches with the grid's."""
    args = sys.argv[1:]
    extra = [args[i + 1] for i, a in enumerate(args) if a == "--off-grid"]
    pos = [a for i, a in enumerate(args) if a != "--off-grid" and (i == 0 or args[i - 1] != "--off-grid")]
    grid_dir = pos[0]
    out = pos[1] if len(pos) > 1 else "sim/accumulation/src/cublas_h100_grid.hpp"
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
