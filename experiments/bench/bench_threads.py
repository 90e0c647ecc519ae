#!/usr/bin/env python3
"""The default thread count against one thread, on a quiet machine and on one whose cores are all
busy with other processes (one `yes >/dev/null` per core): a small training run (the DeepSpeed
fp16 config, an MLP at batch 8) through the rpsim command and through the Python module.

Issue #36: with OpenMP's default active waiting, the default (one thread per core) ran 2-3 steps/s
against 16.5 steps/s with --threads 1 while other processes used the cores. Figures: the median
over rounds of each side's wall time and of the ratio default / one thread, pair by pair (the two
alternate, A B B A ..., so a drift of the machine's speed cancels). The command line is timed as
whole processes; the Python module in one process, calling rpsim.train with threads=0 and
threads=1 in turn (so also checking that threads=1 does not stick to later calls).

    experiments/bench/bench_threads.py [--rpsim build/rpsim] [--python-path build/python]
                                       [--steps 40] [--rounds 5] [--loads quiet,busy]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
CONFIG = os.path.join(SOURCE, "experiments", "configs", "deepspeed-fp16.json")

# One process: imports rpsim once, then times rpsim.train with 0 and 1 threads in turn.
PYTHON_SIDE = r"""
import json, sys, time
import rpsim
config, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rpsim.train(config, steps=2, as_frame=False)  # warm-up: data read, pages touched
times = {"default": [], "one": []}
for r in range(rounds):
    order = [("default", 0), ("one", 1)] if r % 2 == 0 else [("one", 1), ("default", 0)]
    for name, threads in order:
        start = time.perf_counter()
        result = rpsim.train(config, steps=steps, threads=threads, as_frame=False)
        times[name].append(time.perf_counter() - start)
        if name == "default":
            times.setdefault("default_threads", result.meta["threads"])
print(json.dumps(times))
"""


def cli_times(rpsim, steps, rounds, out):
    """Wall seconds of `rpsim train` with the default thread count and with --threads 1, alternating."""
    base = [rpsim, "train", CONFIG, "--set", f"steps={steps}", "--quiet", "--out", out]
    times = {"default": [], "one": []}
    subprocess.run(base, check=True, capture_output=True)  # warm-up
    for r in range(rounds):
        order = [("default", []), ("one", ["--threads", "1"])]
        for name, extra in order if r % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            subprocess.run(base + extra, check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    return times


def python_times(python_path, steps, rounds):
    env = dict(os.environ, PYTHONPATH=python_path + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", PYTHON_SIDE, CONFIG, str(steps), str(rounds)], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def report(label, load, times, steps):
    ratios = [d / o for d, o in zip(times["default"], times["one"])]
    d, o = statistics.median(times["default"]), statistics.median(times["one"])
    print(f"{label:<7} {load:<6} default {d:7.3f} s ({steps / d:6.1f} steps/s)   --threads 1 {o:7.3f} s "
          f"({steps / o:6.1f} steps/s)   default / one: median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rpsim", default=os.path.join(SOURCE, "build", "rpsim"))
    ap.add_argument("--python-path", default=os.path.join(SOURCE, "build", "python"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loads", default="quiet,busy", help="quiet, busy (one `yes` per core) or both")
    ap.add_argument("--only", choices=["cli", "python"], help="one front-end only")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    print(f"{cores} cores; {a.steps} steps of {os.path.relpath(CONFIG, SOURCE)} per run, {a.rounds} rounds; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, "
          f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for load in a.loads.split(","):
            hogs = []
            if load == "busy":
                hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(cores)]
            elif load != "quiet":
                ap.error(f"--loads: {load!r} is neither quiet nor busy")
            try:
                if a.only != "python":
                    report("rpsim", load, cli_times(a.rpsim, a.steps, a.rounds, os.path.join(tmp, "run")), a.steps)
                if a.only != "cli":
                    report("python", load, python_times(a.python_path, a.steps, a.rounds), a.steps)
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()


if __name__ == "__main__":
    main()
