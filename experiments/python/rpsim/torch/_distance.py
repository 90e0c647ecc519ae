"""torch.cdist as ATen 1.13 computes it (Distance.cpp), for rpsim.torch.emulate: for p = 2 past 25 rows
on either side (or compute_mode="use_mm_for_euclid_dist") it is _euclidean_dist, one composite whose
matmul the emulation would not see (GemmWatch refused it): the squared norms, one matmul of [-2 x1, |x1|^2,
1] with [x2, 1, |x2|^2]^T, clamp_min(0) and sqrt, run here as those ops under the emulation's mode, with
_euclidean_dist's own backward (derivatives.yaml: _euclidean_dist_backward's ratio, sums and two
matmuls, not autograd through the forward's ops), also under the mode. Every other case is ATen's
_cdist_forward, which holds no GEMM: the mode's binary32 path (PyTorch's arithmetic, the result
rounded). cdist is on autocast's fp32 list: under autocast its inputs come in binary32 and its inner
ops are not cast, its matmul computing in binary32 (_functions.inside, Emulation.gemm_config)."""
import math

import torch

from ._functions import innermost_emulation, inside

_MODES = {"use_mm_for_euclid_dist_if_necessary": None, "use_mm_for_euclid_dist": 1,
          "donot_use_mm_for_euclid_dist": 2}


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """torch.cdist(x1, x2, p, compute_mode) in ATen's steps, under the emulation's mode."""
    if compute_mode not in _MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")  # torch.functional's
    mode = _MODES[compute_mode]
    bad = x1.dim() < 2 or x2.dim() < 2 or x1.shape[-1] != x2.shape[-1] or p < 0
    mm = p == 2 and (mode == 1 or (mode is None and max(x1.shape[-2], x2.shape[-2]) > 25))
    if bad or not mm or x1.numel() == 0 or x2.numel() == 0:  # (its checks and messages, and no GEMM)
        return torch.ops.aten._cdist_forward(x1, x2, p, mode)  # (the mode's binary32 path)
    batch = torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    r1, r2, c = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    if c == 0:
        return torch.zeros(*batch, r1, r2, dtype=x1.dtype)
    count = math.prod(batch)
    if count != 1:  # cdist_impl: both expanded to the common batch, contiguous, as (count, rows, c)
        x1 = x1.expand(*batch, r1, c).contiguous().view(count, r1, c)
        x2 = x2.expand(*batch, r2, c).contiguous().view(count, r2, c)
    return _EuclideanDist.apply(x1, x2, innermost_emulation()).view(*batch, r1, r2)


class _EuclideanDist(torch.autograd.Function):
    """at::_euclidean_dist and its backward, each as ATen writes it, under `emulation`'s mode."""

    @staticmethod
    def forward(ctx, x1, x2, emulation):
        # (run from cdist under the emulation's mode: these ops are emulated, without autograd)
        x1_norm = x1.pow(2).sum(-1, keepdim=True)
        x1_pad = torch.ones_like(x1_norm)
        x2_norm = x2.pow(2).sum(-1, keepdim=True)
        x2_pad = torch.ones_like(x2_norm)
        x1_ = torch.cat([x1.mul(-2), x1_norm, x1_pad], -1)
        x2_ = torch.cat([x2, x2_pad, x2_norm], -1)
        result = x1_.matmul(x2_.mT).clamp_min_(0).sqrt_()
        ctx.emulation, ctx.cast = emulation, emulation.autocast_whole
        ctx.save_for_backward(x1, x2, result)
        return result

    @staticmethod
    def backward(ctx, grad):
        x1, x2, res = ctx.saved_tensors
        with inside(ctx.emulation, ctx.cast):  # _euclidean_dist_backward (FunctionsManual.cpp), as the forward ran
            ratio = grad / res
            ratio.masked_fill_(res == 0, 0)
            g1 = x1 * ratio.sum(-1, True) - ratio.matmul(x2)
            g2 = x2 * ratio.sum(-2, False).unsqueeze(-1) - ratio.mT.matmul(x1)
        return g1, g2, None
