"""The cells and files of rpsim.torch.Trainer's run folder, written as `rpsim train` writes them
(numbers as %.17g, fractions over flattened tensors, log2 histograms, atomic writes)."""
import math
import os
import tempfile

import torch


def num(v):
    """%.17g, or nan / inf / -inf, as the CLI writes numbers."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "%.17g" % v


def _write_atomic(path, text):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _flat(tensors):
    ts = [t.detach().reshape(-1).double() for t in tensors if t is not None]
    return torch.cat(ts) if ts else torch.zeros(0, dtype=torch.float64)


def _zero_vs(emulated, reference):
    if emulated.numel() == 0 or emulated.numel() != reference.numel():
        return 0.0
    return float(((emulated == 0) & (reference != 0) & torch.isfinite(reference)).sum()) / emulated.numel()


def _nonfinite(t):
    return float((~torch.isfinite(t)).sum()) / t.numel() if t.numel() else 0.0


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
