"""rpsim.keep_freed_memory (rpsim/io/process.hpp), and the front-ends that run a training loop calling
it: after it, a 16 MiB block comes from the heap (not its own mmap) and stays there when freed, so
the next step's tensor of that size is not faulted in again page by page. Each case is a fresh
process: glibc's settings are the process's. The probe reads glibc's mallinfo2 (glibc >= 2.33)."""
import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
if not hasattr(libc, "mallinfo2"):
    print("no-mallinfo2"); sys.exit(0)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
import rpsim
{setup}
size = 16 << 20
before = libc.mallinfo2()
p = libc.malloc(size)
ctypes.memset(p, 1, size)
during = libc.mallinfo2()
libc.free(p)
after = libc.mallinfo2()
print(during.hblkhd - before.hblkhd, during.arena - before.arena, during.arena - after.arena)
"""

TRAINER = """
import torch
from torch import nn
import rpsim.torch as rt
rt.Trainer(nn.Linear(4, 2), "fp16-amp", shadow=False, histogram_steps=())
"""


def probe(setup):
    r = subprocess.run([sys.executable, "-c", PROBE.replace("{setup}", setup)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    if r.stdout.strip() == "no-mallinfo2":
        pytest.skip("this C library has no mallinfo2 (glibc >= 2.33)")
    mapped, heap_grew, heap_returned = (int(v) for v in r.stdout.split())
    return mapped, heap_grew, heap_returned


def test_without_it_a_large_block_is_its_own_mapping():
    # The probe tells the two settings apart: glibc's default maps a 16 MiB block on its own.
    mapped, heap_grew, _ = probe("")
    assert mapped >= 16 << 20 and heap_grew == 0


@pytest.mark.parametrize("setup", ["rpsim.keep_freed_memory()", TRAINER], ids=["function", "Trainer"])
def test_freed_blocks_stay_in_the_heap(setup):
    mapped, _, heap_returned = probe(setup)
    assert mapped == 0  # from the heap (which may have had part of it free already)
    assert heap_returned == 0  # not trimmed back to the kernel on free
