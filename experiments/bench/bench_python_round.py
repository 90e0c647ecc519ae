#!/usr/bin/python3
"""rpsim.round against the C++ array path (formats/array.hpp round_values) on the same buffer.

Both run in this process on the same 10^7 float64 values: the C++ side is timed inside C++
(rpsim._core._time_round_values, no Python between the clock reads), the Python side with the
same clock around rpsim.round. Repeats are interleaved and the fastest of each kept, so a busy
machine slows both alike. Single-threaded cases are timed in this thread's CPU time (time the
shared machine gave to others is not counted; --wall for wall time), two-threaded ones in wall
time. Two pairs: rpsim.round(x, out=buf) against round_values into the same touched buffer, and
rpsim.round(x) (a new result array) against round_values into a new buffer allocated and freed
inside the C++ timing ("C++ new": 8 bytes a value of fresh memory cost page faults and zeroing in
either language). Prints one line per case and the load average.

    PYTHONPATH=build/python /usr/bin/python3 experiments/bench/bench_python_round.py [--n 10000000]
"""
import argparse
import os
import time

import numpy as np
import rpsim
from rpsim import _core

CASES = [("binary16", "rne"), ("bfloat16", "rne"), ("e4m3", "rne"), ("binary16", "sr")]


def seconds(fn, cpu):
    clock = time.thread_time if cpu else time.perf_counter
    t0 = clock()
    fn()
    return clock() - t0


def measure(x, fmt, rounding, threads, repeats, cpu):
    out = np.empty_like(x)
    cpp = cpp_new = into = new = float("inf")
    for _ in range(repeats):  # interleaved: the four see the same machine
        cpp = min(cpp, _core._time_round_values(x, out, fmt, rounding, threads, 1, cpu))
        into = min(into, seconds(lambda: rpsim.round(x, fmt, rounding, threads=threads, out=out), cpu))
        cpp_new = min(cpp_new, _core._time_round_values(x, out, fmt, rounding, threads, 1, cpu, True))
        new = min(new, seconds(lambda: rpsim.round(x, fmt, rounding, threads=threads), cpu))
    # Same bits both ways (the timing is of the same work).
    ref = np.empty_like(x)
    _core._time_round_values(x, ref, fmt, rounding, threads, 1, False)
    assert np.array_equal(rpsim.round(x, fmt, rounding, threads=threads).view(np.uint64), ref.view(np.uint64))
    return cpp, into, cpp_new, new


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--wall", action="store_true", help="wall time for single-threaded cases too")
    args = ap.parse_args()
    x = np.random.default_rng(0).uniform(-1, 1, args.n)
    print(f"{args.n} float64 values, uniform(-1, 1); fastest of {args.repeats}; "
          f"load average before {os.getloadavg()[0]:.2f}")
    print(f"{'format':<9} {'rnd':<4} {'thr':>3} {'clock':<6} {'C++ ms':>8} {'round(out=) ms':>15} {'ratio':>6} "
          f"{'C++ new ms':>10} {'round() ms':>11} {'ratio':>6}")
    for threads in args.threads:
        for fmt, rounding in CASES:
            cpu = threads == 1 and not args.wall
            cpp, into, cpp_new, new = measure(x, fmt, rounding, threads, args.repeats, cpu)
            print(f"{fmt:<9} {rounding:<4} {threads:>3} {'cpu' if cpu else 'wall':<6} {cpp * 1e3:8.2f} "
                  f"{into * 1e3:15.2f} {into / cpp:6.3f} {cpp_new * 1e3:10.2f} {new * 1e3:11.2f} {new / cpp_new:6.3f}")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
