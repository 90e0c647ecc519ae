"""torch.cov and torch.corrcoef as ATen computes them (Correlation.cpp), for rpsim.torch.emulate:
PyTorch runs each as one composite whose mm the emulation would not see (GemmWatch refuses it), so
it runs these in their place, under its mode: the weighted mean, the centred observations and the
normalisation as the elementwise ops and sums they are, the product of the centred observations
with their (weighted) transpose as one mm on the op table's matmul row (autocast casts that mm, as
inside ATen's composite on a GPU). Both are composites in ATen (no backward of their own), so the
gradient is that of the same ops."""
import warnings

import torch


def _check_weights(w, name, n, integral):
    kind = "integral" if integral else "floating point"
    if w.dim() > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                           f"{w.dim()} dimensions")
    if w.is_floating_point() == integral or w.is_complex():
        raise RuntimeError(f"cov(): expected {name} to have {kind} dtype but got {name} with {w.dtype} dtype")
    if w.numel() != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                           f"input but got {w.numel()} != {n}")
    if n > 0 and not bool(w.min() >= 0):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input, *, correction=1, fweights=None, aweights=None):
    """torch.cov(input, correction=, fweights=, aweights=) in ATen's steps."""
    # torch's own checks and messages (on meta tensors they cannot run: cov reads values).
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.dim()} dimensions")
    if input.dtype == torch.bool:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.view(1, -1) if input.dim() < 2 else input
    n = x.shape[1]
    w = None
    if fweights is not None:
        _check_weights(fweights, "fweights", n, integral=True)
        w = fweights
    if aweights is not None:
        _check_weights(aweights, "aweights", n, integral=False)
        w = aweights if w is None else w * aweights
    w_sum = torch.tensor(n) if w is None else w.sum()
    if w is not None and not bool(w_sum != 0):
        raise RuntimeError("cov(): weights sum to zero, can't be normalized")
    avg = (x if w is None else x * w).sum(1) / w_sum
    if w is None:
        norm = torch.tensor(n - correction)
    elif correction == 0:
        norm = w_sum
    elif aweights is None:
        norm = w_sum - correction
    elif fweights is None and n == 1 and correction == 1:
        norm = torch.tensor(0)
    else:
        norm = w_sum - correction * (w * aweights).sum() / w_sum
    if bool(norm <= 0):
        warnings.warn("cov(): degrees of freedom is <= 0")
        norm = torch.zeros_like(norm)
    if n == 1 and (fweights is None) != (aweights is None):
        x = torch.zeros_like(x)
    else:
        x = x - avg.unsqueeze(1)
    c = torch.mm(x, (x if w is None else x * w).t())
    return torch.true_divide(c, norm).squeeze()


def corrcoef(input):
    """torch.corrcoef(input): cov, each entry divided by its row's and then its column's standard
    deviation, clipped to [-1, 1]."""
    if input.dim() > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.dim()} dimensions")
    c = cov(input)
    if c.dim() == 0:
        return c / c
    stddev = torch.sqrt(c.diagonal())
    c = c / stddev.view(-1, 1)
    c = c / stddev.view(1, -1)
    return c.clip(-1, 1)
