"""Progress lines of a long rpsim.torch loop, as `rpsim train` prints them (sim/io progress.cpp): one
line two seconds in and then every ten seconds (on a terminal one line rewritten twice a second), each
with the steps done, the elapsed time, the rate, an ETA where the total is known, and the step's
loss and loss scale, to stderr."""
import math
import sys
import time

FIRST_S, INTERVAL_S, TERMINAL_S = 2.0, 10.0, 0.5


def format_duration(seconds):
    """"4.2 s", "45 s", "3 min 20 s", "2 h 05 min" (progress.cpp's format_duration)."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    if seconds < 10:
        return f"{seconds:.1f} s"
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


class ProgressLine:
    """update(done, total, detail): prints when a line is due; total None: no percentage, no ETA."""

    def __init__(self, label, unit="steps", out=None, clock=time.monotonic):
        self.out = out if out is not None else sys.stderr
        self.terminal = bool(getattr(self.out, "isatty", lambda: False)())
        self.label, self.unit, self.clock = label, unit, clock
        self.interval = TERMINAL_S if self.terminal else INTERVAL_S
        self.start = clock()
        self.last = min(FIRST_S, self.interval) - self.interval  # the first line FIRST_S in
        self.open_line = False

    def update(self, done, total=None, detail=""):
        now = self.clock() - self.start
        if now - self.last < self.interval and (total is None or done < total):
            return
        self.last = now
        rate = done / now if now > 0 else 0.0
        if total is None:
            head, eta = f"{done} {self.unit}", ""
        else:
            left = "done" if done >= total else (f"ETA {format_duration((total - done) / rate)}" if rate > 0
                                                  else "ETA unknown")
            head, eta = f"{done}/{total} {self.unit} ({100.0 * done / total if total else 0:.0f}%)", f", {left}"
        line = (f"{self.label}: {head}, {format_duration(now)} elapsed, {rate:.3g} {self.unit}/s{eta}"
                + (f"; {detail}" if detail else ""))
        if self.terminal:
            self.out.write(f"\r{line}\033[K")
            self.open_line = True
        else:
            self.out.write(line + "\n")
        self.out.flush()

    def finish(self):
        if self.open_line:
            self.out.write("\n")
            self.out.flush()
        self.open_line = False
