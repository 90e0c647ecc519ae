"""binary32 -> binary16 (nearest even) by rpsim equals NumPy's float16 conversion, and
binary32 -> bfloat16 equals the integer rule frameworks use (add 0x7FFF plus the lowest kept
bit, keep the top 16 bits), on every input where the rounding decision can go wrong.

Every sign, every binary32 exponent (zeros, subnormals, infinities and NaNs included) and
every value of the kept fraction bits, each with the discarded bits at the patterns that
decide rounding: zero, one ulp of binary32, just below, at and just above the half-way
point, all ones, and random patterns. A binary16 subnormal keeps fewer fraction bits; its
half-way point falls inside the enumerated kept bits, so ties and their binary32 neighbours
are covered there too. That is 4.7M inputs for binary16 and 0.6M for bfloat16; the C++ suite's `[long]` case runs all
2^32 binary32 values against x86 hardware, so this file only has to prove the Python path
agrees with NumPy, quickly. NaNs are compared as NaNs (NumPy keeps a signalling payload
unquieted)."""
import numpy as np
import rpsim


def edge_inputs(kept_bits, seed):
    """Every sign/exponent and kept-fraction value, with the discarded bits at each edge."""
    low = 23 - kept_bits
    half = 1 << (low - 1)
    rng = np.random.default_rng(seed)
    patterns = np.concatenate([
        np.array([0, 1, half - 1, half, half + 1, (1 << low) - 1], dtype=np.uint32),
        rng.integers(0, 1 << low, size=3, dtype=np.uint32),
    ])
    top = np.arange(1 << (9 + kept_bits), dtype=np.uint32) << np.uint32(low)
    return (top[:, None] | patterns[None, :]).ravel()


def test_binary32_to_binary16_equals_numpy_at_every_rounding_edge():
    u = edge_inputs(10, seed=1)
    x = u.view(np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    got = rpsim.encode(x, "binary16")
    nan = np.isnan(x)
    bad = np.flatnonzero(got[~nan] != want[~nan])
    assert bad.size == 0, f"{bad.size} differ, first input {u[~nan][bad[0]]:#010x}"
    assert ((got[nan] & 0x7C00) == 0x7C00).all() and ((got[nan] & 0x3FF) != 0).all()
    # the enumeration reaches what it claims: ties to even both ways, subnormals, overflow
    assert np.isinf(want.view(np.float16)).sum() > 0
    assert ((want & 0x7C00) == 0).sum() > (1 << 16)


def test_binary32_to_bfloat16_equals_the_integer_rule_at_every_rounding_edge():
    u = edge_inputs(7, seed=2)
    x = u.view(np.float32)
    nan = np.isnan(x)
    rule = u + np.uint32(0x7FFF)
    rule += (u >> 16) & np.uint32(1)
    rule >>= 16
    got = rpsim.encode(x, "bfloat16")
    bad = np.flatnonzero(got[~nan] != rule[~nan].astype(np.uint16))
    assert bad.size == 0, f"{bad.size} differ, first input {u[~nan][bad[0]]:#010x}"
    assert np.isnan(rpsim.decode(got[nan], "bfloat16")).all()


def test_random_binary32_agree_with_numpy():
    u = np.random.default_rng(3).integers(0, 1 << 32, size=1 << 22, dtype=np.uint64).astype(np.uint32)
    x = u.view(np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    got = rpsim.encode(x, "binary16")
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
