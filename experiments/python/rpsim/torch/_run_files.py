"""The cells and files of rpsim.torch's run folders (Trainer, Telemetry, capture_gemms), written as
`rpsim train` writes them: numbers as %.17g, fractions over flattened tensors, log2 histograms; the
folder checked before the first step, each file replaced atomically, with the umask's mode."""
import atexit
import math
import os
import tempfile
import time
import weakref

import torch

from .. import _core
from ._scaler import _readable


class RunningMeta:
    """meta.json while a run's rows are appended step by step: replaced at most once every SECONDS (a
    rename costs milliseconds on a busy file system, measured 4.6 ms a step against a 17 ms step of a
    small MLP; the rows themselves are appended every step), and once more when the interpreter exits
    (atexit: a script stopped by Ctrl-C or an error) while the run is not finished. write() is the
    owner's writer of meta.json; the owner is held weakly."""
    SECONDS = 1.0

    def __init__(self, owner, write_name):
        self.last = None
        self.done = False
        atexit.register(_write_at_exit, weakref.ref(owner), write_name, self)

    def due(self):
        now = time.monotonic()
        if self.last is None or now - self.last >= self.SECONDS:
            self.last = now
            return True
        return False


def _write_at_exit(ref, write_name, meta):
    owner = ref()
    if owner is not None and not meta.done and meta.last is not None:
        try:
            getattr(owner, write_name)()
        except OSError:  # (the folder gone at exit: nothing more to keep)
            pass


class OutputDirError(OSError):
    """An out= folder that cannot hold a run's files (a file of that name, no permission, a read-only
    or pseudo file system): raised by the constructor, before any step, as `rpsim train` checks it."""


def ensure_writable_dir(path, who):
    """Creates `path` (and parents) and makes and removes a file in it, as the CLI's
    io::ensure_writable_dir does before any work; OutputDirError naming `who`'s out= otherwise."""
    path = os.fspath(path)
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".rpsim-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputDirError(e.errno, f"{who}: out={path!r} cannot hold the run's files: "
                                      f"{e.strerror or e}") from e
    return path


def _umask():
    """The process's umask, read without changing it where Linux says it (/proc/self/status)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # (elsewhere: set and restored at once)
    os.umask(mask)
    return mask


def write_atomic(path, data, who="rpsim.torch"):
    """`data` (str, bytes, or a function writing to a binary file) into a temporary file beside `path`,
    then renamed onto it: a reader or an interrupted run never sees half a file, a failed write (a full
    disk) leaves neither a partial file nor the temporary, and the OSError names `path`. The file gets
    the mode open() would give it (0666 less the umask; mkstemp's own is 0600), as the CLI's files."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise OSError(e.errno, f"{who}: writing {path} failed: {e.strerror or e}") from e
        raise


def append_text(path, text, who="rpsim.torch"):
    """`text` (whole rows) added at the end of `path` in one write: a row is never split by a Ctrl-C
    (Python runs its handler between calls, not inside the write)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            data = text.encode()
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
    except OSError as e:
        raise OSError(e.errno, f"{who}: writing {path} failed: {e.strerror or e}") from e


def num(v):
    """%.17g, or nan / inf / -inf, as the CLI writes numbers."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "%.17g" % v


def _flat(tensors):
    ts = [t.detach().reshape(-1).double() for t in tensors if t is not None]
    return torch.cat(ts) if ts else torch.zeros(0, dtype=torch.float64)


def _zero_vs(emulated, reference):
    """The fraction of entries zero in `emulated` but nonzero and finite in `reference` (the op core's
    count, read where the tensors lie); 0 when either is empty or their sizes differ."""
    if emulated.numel() == 0 or emulated.numel() != reference.numel():
        return 0.0
    e, r = (_readable(t.detach()).numpy() for t in (emulated, reference))
    return _core._count_zero_vs(e, r) / emulated.numel()


def _nonfinite(t):
    """The fraction of t's entries that are inf or NaN, counted by the op core where t lies."""
    return _core._count_nonfinite(_readable(t.detach()).numpy()) / t.numel() if t.numel() else 0.0


def _histogram(rows, prefix, t, unscale):
    v = t.detach().reshape(-1).double() * unscale
    fin = torch.isfinite(v)
    zeros, nonfinite = int((v == 0).sum()), int((~fin).sum())
    if zeros:
        rows.append(f"{prefix}zero,{zeros}")
    if nonfinite:
        rows.append(f"{prefix}nonfinite,{nonfinite}")
    nz = v[fin & (v != 0)]
    if nz.numel():
        _, e = torch.frexp(nz)  # ilogb(v) = frexp's exponent - 1
        bins, counts = torch.unique(e - 1, return_counts=True)
        rows.extend(f"{prefix}{int(b)},{int(c)}" for b, c in zip(bins, counts))
