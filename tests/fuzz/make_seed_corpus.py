#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/<target>/.

Deterministic (fixed seed), so the committed corpus can be regenerated; the
corpus also holds inputs that libFuzzer found and merged (`-merge=1`).
Run: python3 tests/fuzz/make_seed_corpus.py
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20261122)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# formats_vs_mpfr: 28-byte records (format, op, conversion source, options,
# three big-endian 64-bit operands). One file per operation, one record per
# format of the 22 under test, and a record with DAZ/FTZ/overflow options.
N_FORMATS, N_OPS = 22, 13
for op in range(N_OPS):
    records = b""
    for fmt in range(N_FORMATS):
        ops = [rng.getrandbits(64) for _ in range(3)]
        records += bytes([fmt, op, rng.randrange(N_FORMATS), 0]) + struct.pack(">QQQ", *ops)
    records += bytes([3, op, 1, 0b1111]) + struct.pack(">QQQ", 0x0001, 0x8400, 0x3C00)
    write("formats_vs_mpfr", f"op{op:02d}", records)

# testfloat_line: byte 0 even = a vector line for operation byte 1 (the
# fuzzer's kOperations order); odd = an operation name.
lines = [
    (0, "3447 BA00 B7B9 00"),                          # f16_add
    (1, "BFFFFFFE C07BFFFE BC08DF2F 40FBBB8C 01"),     # f32_mulAdd
    (2, "B68FFFF8000000FF 8000 03"),                   # f64_to_f16
    (3, "86E3 86E30000 00"),                           # bf16_to_f32
    (4, "7F 7FC00000 00"),                             # e4m3_to_f32
    (5, "3F800000 40000000 1 00"),                     # f32_lt_quiet
    (0, "3447 BA00 B7B9"),                             # too few fields
    (0, "3447 BA00 B7B9 00 00"),                       # too many
    (0, "3447 BAZ0 B7B9 00"),                          # not hex
    (0, "13447 BA00 B7B9 00"),                         # too wide
    (0, "3447 BA00 B7B9 FF"),                          # bad flags
    (8, "7C00\t3C00  7C00 00\r"),                      # f16_sqrt, odd spacing
]
for i, (op, line) in enumerate(lines):
    write("testfloat_line", f"line{i:02d}", bytes([0, op]) + line.encode())
for i, name in enumerate(["f16_add", "f32_to_bf16", "e4m3fnuz_to_f64", "f16_nope", "x_to_", "_add",
                          "f64_mulAdd", "e5m10_lt_quiet", "e99m2_add", "exp=5,man=2_to_f16"]):
    write("testfloat_line", f"name{i:02d}", b"\x01" + name.encode())

# format_spec: spec, NUL, then 24-byte operand triples.
specs = ["e5m10", "e4m3fn", "e5m2fnuz", "e3m2f", "e8m0", "binary64", "bf16",
         "exp=5,man=10,bias=15,subnormals=no,nonfinite=ieee,overflow=saturate,sign=yes",
         "exp=4,man=3,sign=no,nonfinite=finite_only", "exp=8,man=0,bias=127,nonfinite=fn",
         "exp=11,man=52,bias=1", "exp=3,man=1,bias=-2", "e1m0f", "e11m52", "e0m3", "exp=5",
         "exp=6,man=4,overflow=nan,nonfinite=fnuz"]
for i, spec in enumerate(specs):
    operands = b"".join(struct.pack(">Q", rng.getrandbits(64)) for _ in range(6))
    write("format_spec", f"spec{i:02d}", spec.encode() + b"\0" + operands)

# array_vs_scalar: format, mode, options, 8-byte seed, then raw elements
# (binary64, or binary32 when options bit 5 is set): special values first.
arng = random.Random(7)
specials = [0.0, -0.0, 1.0, -1.5, 65504.0, 65520.0, 448.0, 464.0, 5.96e-8, 2.98e-8, 1e-40,
            float("inf"), float("-inf"), float("nan"), 3.4e38, 1e300, 2**-1074, 0.1, 1 / 3]
for fmt in range(N_FORMATS):
    for mode in (0, 6):
        opts = arng.randrange(64) if fmt % 3 == 0 else 0
        vals = specials + [arng.uniform(-2, 2) * 2.0 ** arng.randrange(-30, 30) for _ in range(13)]
        data = bytes([fmt, mode | (arng.randrange(32) << 3), opts & ~0x20]) + struct.pack("<Q", arng.getrandbits(64))
        data += b"".join(struct.pack("<d", v) for v in vals)
        write("array_vs_scalar", f"f{fmt:02d}m{mode}", data)
        if fmt % 4 == 1:
            data = bytes([fmt, mode, 0x20]) + struct.pack("<Q", 1)
            data += b"".join(struct.pack("<f", v) for v in specials[:13])
            write("array_vs_scalar", f"f{fmt:02d}m{mode}_f32", data)

# train_config: an optional `key=value` override line, then a training config
# (the shipped ones and the broken ones of the bad-input table).
import glob

REPO = os.path.dirname(os.path.dirname(HERE))
overrides = ["", "optimizer.lr=0.1", "policy=bf16-amp", "loss_scaler.growth_interval=0", "batch_size=x", "a.b.c=1"]
configs = sorted(glob.glob(os.path.join(REPO, "experiments", "configs", "*.json")))
configs = [c for c in configs if not os.path.basename(c).startswith(("study-", "sweep-"))]
configs += sorted(glob.glob(os.path.join(REPO, "tests", "data", "bad_input", "train_*.json")))
for i, path in enumerate(configs):
    with open(path, "rb") as f:
        text = f.read()
    write("train_config", f"config{i:02d}", overrides[i % len(overrides)].encode() + b"\n" + text)
