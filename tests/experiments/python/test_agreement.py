"""Agreement with the peers: round-to-nearest-even conversions to binary16 equal NumPy's
float16 (every encoding, every midpoint between neighbours and one binary64 ulp either side,
random values over the whole range, float64 and float32 input); e4m3, e5m2 and bfloat16 equal
a reference built here from the OCP and IEEE bit layouts alone. ml_dtypes, the usual peer for
those three, is not packaged by Debian 12 (apt-cache policy python3-ml-dtypes: no candidate).

The reference (`Layout.nearest_even`) decodes every encoding from its sign, exponent and
fraction fields, sorts the finite magnitudes, and rounds |x| to the nearer neighbour, a tie to
the even encoding; beyond the largest finite value it continues the top binade (max + one ulp
is the next value, of the other parity) and so decides overflow the IEEE way: the result is
infinity (e5m2, bfloat16) or NaN (E4M3FN, which has no infinity) when that unbounded rounding
goes past max."""
import struct

import numpy as np
import pytest
import rpsim


class Layout:
    """A small float format from its bit layout: the value of every encoding."""

    def __init__(self, name, exp_bits, man_bits, bias, value_of, overflow_code):
        self.name, self.bits = name, 1 + exp_bits + man_bits
        self.sign = 1 << (self.bits - 1)
        codes = np.arange(self.sign, dtype=np.uint64)  # non-negative encodings
        values = np.array([value_of(int(c)) for c in codes])
        finite = np.isfinite(values)
        order = np.argsort(values[finite], kind="stable")
        self.codes, self.values = codes[finite][order], values[finite][order]
        self.overflow_code = overflow_code  # the encoding of +overflow (inf or NaN)
        top_ulp = self.values[-1] - self.values[-2]
        self.next_above_max = self.values[-1] + top_ulp  # the unbounded format's next value

    def nearest_even(self, x):
        x = np.asarray(x, dtype=np.float64)
        mag = np.abs(x)
        vals = np.append(self.values, self.next_above_max)
        codes = np.append(self.codes, self.codes[-1] + 1)  # parity of the next value
        hi = np.clip(np.searchsorted(vals, mag), 1, len(vals) - 1)
        lo = hi - 1
        d_lo, d_hi = mag - vals[lo], vals[hi] - mag
        pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (codes[hi] % 2 == 0))
        idx = np.where(pick_hi, hi, lo)
        code = codes[idx].astype(np.uint64)
        overflow = (idx == len(vals) - 1) | (mag > self.next_above_max)
        code = np.where(overflow, self.overflow_code, code)
        code = code | np.where(np.signbit(x), self.sign, 0).astype(np.uint64)
        return code, np.isnan(x)


def e4m3_value(c):  # OCP 8-bit FP E4M3FN: bias 7, no infinity, S.1111.111 is NaN
    e, m = (c >> 3) & 0xF, c & 7
    if e == 0xF and m == 7:
        return np.nan
    return m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


def ieee_value(exp_bits, man_bits):
    bias, top = (1 << (exp_bits - 1)) - 1, (1 << exp_bits) - 1

    def value(c):
        e, m = (c >> man_bits) & top, c & ((1 << man_bits) - 1)
        if e == top:
            return np.inf if m == 0 else np.nan
        scale = 2.0 ** (1 - bias) if e == 0 else 2.0 ** (e - bias)
        return (m / 2**man_bits if e == 0 else 1 + m / 2**man_bits) * scale

    return value


def bfloat16_value(c):  # the top half of a binary32
    return struct.unpack("<f", struct.pack("<I", c << 16))[0]


LAYOUTS = {
    "e4m3": Layout("e4m3", 4, 3, 7, e4m3_value, 0x7F),
    "e5m2": Layout("e5m2", 5, 2, 15, ieee_value(5, 2), 0x7C),
    "bfloat16": Layout("bfloat16", 8, 7, 127, bfloat16_value, 0x7F80),
    "binary16": Layout("binary16", 5, 10, 15, ieee_value(5, 10), 0x7C00),
}


def probes(layout, rng, n_random=200_000):
    """Every finite value, every midpoint between neighbours (and beyond max), one binary64
    ulp either side of each, zeros, infinities, NaN and random magnitudes over the range."""
    v = np.append(layout.values, layout.next_above_max)
    mids = (v[:-1] + v[1:]) / 2
    base = np.concatenate([layout.values, mids, [layout.next_above_max, layout.next_above_max * 4]])
    near = np.concatenate([base, np.nextafter(base, np.inf), np.nextafter(base, -np.inf)])
    tiny, big = layout.values[1], layout.values[-1]
    rand = np.exp(rng.uniform(np.log(tiny / 8), np.log(big * 2), n_random))
    mags = np.concatenate([near, rand, [np.inf, np.nan]])
    mags = mags[mags >= 0]
    return np.concatenate([mags, -mags])


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "bfloat16", "binary16"])
def test_round_to_nearest_even_equals_the_bit_layout_reference(name):
    layout = LAYOUTS[name]
    x = probes(layout, np.random.default_rng(7))
    want, is_nan = layout.nearest_even(x)
    got = rpsim.encode(x, name).astype(np.uint64)
    # A NaN input gives a NaN (its payload is rpsim's NaN policy, tested elsewhere).
    assert np.isnan(rpsim.decode(got[is_nan], name)).all()
    bad = np.flatnonzero(got[~is_nan] != want[~is_nan])
    assert bad.size == 0, [(x[~is_nan][i], hex(got[~is_nan][i]), hex(want[~is_nan][i])) for i in bad[:5]]


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "bfloat16", "binary16"])
def test_decode_equals_the_bit_layout_values(name):
    layout = LAYOUTS[name]
    assert np.array_equal(rpsim.decode(layout.codes, name), layout.values)
    negative = layout.codes | np.uint64(layout.sign)
    assert np.array_equal(rpsim.decode(negative, name), -layout.values)


def test_the_reference_knows_the_overflow_ties():
    # E4M3FN: 464 lies halfway between 448 (1.110 x 2^8) and 480 (1.111, the NaN pattern):
    # the tie goes to the even 448; anything above overflows to NaN. E5M2: 61440 lies halfway
    # between 57344 and 2^16: the tie goes to the even 2^16, i.e. infinity.
    e4m3, e5m2 = LAYOUTS["e4m3"], LAYOUTS["e5m2"]
    assert e4m3.nearest_even([464.0, np.nextafter(464.0, 1e9)])[0].tolist() == [0x7E, 0x7F]
    assert e5m2.nearest_even([np.nextafter(61440.0, 0), 61440.0])[0].tolist() == [0x7B, 0x7C]
    assert rpsim.encode([464.0, 465.0], "e4m3").tolist() == [0x7E, 0x7F]
    assert rpsim.encode([61439.0, 61440.0], "e5m2").tolist() == [0x7B, 0x7C]


def test_binary16_equals_numpy_float16_from_float64():
    rng = np.random.default_rng(3)
    layout = LAYOUTS["binary16"]
    x = np.concatenate([probes(layout, rng), rng.normal(size=100_000) * 2.0 ** rng.integers(-30, 20, 100_000)])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    got = rpsim.encode(x, "binary16")
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.isnan(rpsim.decode(got[nan], "binary16")).all()
    assert np.array_equal(rpsim.round(x[~nan], "fp16"), want[~nan].view(np.float16).astype(np.float64))


def test_binary16_equals_numpy_float16_from_float32():
    # Every binary32 whose exponent lies within or next to binary16's range, with every
    # pattern of the 13 fraction bits that binary16 drops that decides a rounding: 0, 1,
    # just below half, half, just above half, all ones.
    exps = np.arange(127 - 27, 127 + 18, dtype=np.uint32)
    kept = np.arange(1 << 10, dtype=np.uint32)
    dropped = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF], dtype=np.uint32)
    u = (exps[:, None, None] << 23) | (kept[None, :, None] << 13) | dropped[None, None, :]
    u = np.concatenate([u.ravel(), u.ravel() | np.uint32(1 << 31)])
    x = u.view(np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(rpsim.encode(x, "binary16"), want)
    assert np.array_equal(rpsim.round(x, "binary16"), want.view(np.float16).astype(np.float32))


def test_decode_binary16_equals_numpy_for_every_encoding():
    bits = np.arange(1 << 16, dtype=np.uint16)
    want = bits.view(np.float16).astype(np.float64)
    got = rpsim.decode(bits, "binary16")
    nan = np.isnan(want)
    assert np.array_equal(got[~nan], want[~nan])
    # NaNs: NumPy copies the payload bits as they are; rpsim (x86 convention) keeps the payload
    # and sets the quiet bit, so quiet NaNs agree bit for bit and signalling ones differ by it.
    quiet_bit = np.uint64(1 << 51)
    g, w = got[nan].view(np.uint64), want[nan].view(np.uint64)
    assert np.array_equal(g, w | quiet_bit)
    assert np.array_equal(g[(w & quiet_bit) != 0], w[(w & quiet_bit) != 0])
