"""Every binary32 value rounded to binary16 (nearest even) by rpsim equals NumPy's float16
conversion, and the same values rounded to bfloat16 equal the integer rule frameworks use
(add 0x7FFF plus the lowest kept bit, keep the top 16 bits). 2^32 values in chunks of 2^24;
ctest label `long`. NaNs are compared as NaNs (NumPy keeps a signalling payload unquieted)."""
import numpy as np
import rpsim

CHUNK = 1 << 24


def chunks():
    for start in range(0, 1 << 32, CHUNK):
        yield np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32)


def test_every_binary32_to_binary16_equals_numpy():
    for u in chunks():
        x = u.view(np.float32)
        with np.errstate(over="ignore"):
            want = x.astype(np.float16).view(np.uint16)
        got = rpsim.encode(x, "binary16")
        nan = np.isnan(x)
        assert np.array_equal(got[~nan], want[~nan]), f"chunk at {u[0]:#010x}"
        assert ((got[nan] & 0x7C00) == 0x7C00).all() and ((got[nan] & 0x3FF) != 0).all()


def test_every_binary32_to_bfloat16_equals_the_integer_rule():
    for u in chunks():
        x = u.view(np.float32)
        nan = np.isnan(x)
        rule = u + np.uint32(0x7FFF)
        rule += (u >> 16) & np.uint32(1)
        rule >>= 16
        got = rpsim.encode(x, "bfloat16")
        assert np.array_equal(got[~nan], rule[~nan].astype(np.uint16)), f"chunk at {u[0]:#010x}"
        assert np.isnan(rpsim.decode(got[nan], "bfloat16")).all()
