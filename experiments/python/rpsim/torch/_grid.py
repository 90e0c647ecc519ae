"""F.affine_grid as ATen computes it (AffineGridGenerator.cpp, affine_grid_generator_4D / _5D), for
rpsim.torch.emulate: PyTorch runs it as one op whose bmm the emulation would not see (GemmWatch refuses
it), so it runs here under the emulation's mode: the base grid of each output pixel's normalised
coordinates (x, y[, z], 1), in theta's dtype, times theta's transpose as one bmm on the op table's
matmul row (autocast casts that bmm, as inside ATen's op on a GPU); its gradient that bmm's, the
GEMM ATen's affine_grid_generator_backward runs."""
import torch
import torch.nn.functional as F

from ._contract import _meta_check


def _linspace_from_neg_one(theta, steps, align_corners):
    if steps <= 1:
        return torch.zeros((), dtype=theta.dtype)
    r = torch.linspace(-1, 1, steps, dtype=theta.dtype)
    return r if align_corners else r * (steps - 1) / steps


def affine_grid(theta, size, align_corners=None):
    """F.affine_grid(theta, size, align_corners): its checks and warning (torch's own, on meta tensors),
    then the base grid times theta^T."""
    _meta_check(lambda t: F.affine_grid(t, size, align_corners=align_corners), theta)
    align = bool(align_corners)
    n, spatial = size[0], list(size[2:])  # (H, W) or (D, H, W)
    base = torch.empty(n, *spatial, len(spatial) + 1, dtype=theta.dtype)
    for axis, steps in enumerate(reversed(spatial)):  # x along W, y along H, z along D
        shape = [1] * len(spatial)
        shape[len(spatial) - 1 - axis] = steps
        base.select(-1, axis).copy_(_linspace_from_neg_one(theta, steps, align).reshape(shape))
    base.select(-1, len(spatial)).fill_(1)
    grid = torch.bmm(base.view(n, -1, len(spatial) + 1), theta.transpose(1, 2))
    return grid.view(n, *spatial, len(spatial))
