"""Emulated matmul-class ops: mm, bmm, matmul, addmm, baddbmm, linear and conv1d/conv2d as autograd
functions over the op core's GEMM op (rpsim._core._GemmOp: the C++ op `rpsim train`'s layers run,
its casts, FP8/MX/NVFP4 quantisation, GEMM, epilogue and both backward GEMMs) and its col2im. This
file only routes tensors: layout (F.unfold, reshapes) and the autograd plumbing. Without a rule
the GEMM is rpsim.gemm's on the same operands (tests/experiments/python/test_torch_ops.py)."""
import copy

import torch

from ._gemm_config import DEFAULT_MODEL, GemmConfig  # noqa: F401 (rpsim.torch.GemmConfig)
from ._quantize import check_tensor
from ._scaler import _readable
from ._unsupported import no_double_backward


def output_grad_flushed(cfg, mask):
    """Telemetry: the entries of the output gradient that its cast for the backward GEMMs flushed."""
    if getattr(cfg, "on_output_grad_flush", None) is not None:
        cfg.on_output_grad_flush(mask)


def _telemetry_wanted(cfg):
    return any(getattr(cfg, k, None) is not None for k in
               ("on_output_grad_flush", "on_b_grad_flush", "on_bias_grad_flush", "on_input_grad_flush"))


def _keys(cfg):
    return dict(seed=cfg.seed, stream=cfg.stream, layer=cfg.layer)


def _values(t):
    """t detached, as float32 or float64 (no copy where it already is one): float16 / bfloat16 widen
    exactly to float32."""
    t = t.detach()
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


def _np(t):
    """t's values as a C-contiguous float32 or float64 NumPy array (no copy where t already is one)."""
    return _readable(t.detach()).numpy()


def _view(t):
    """t's values as a float32 or float64 NumPy view at t's strides (the GEMM op reads operands where
    they lie: a transposed weight needs no contiguous copy)."""
    return _values(t).numpy()


class _Gemm(torch.autograd.Function):
    """D = epilogue(A B (+ C)) over a batch on the op core's GEMM op (cfg.op): A (B, m, k), B (B, k, n),
    bias (n,) or None, C (B, m, n) or None; a_format the format of A's values (a rule that follows its
    inputs computes in it)."""

    @staticmethod
    def forward(ctx, a, b, bias, c, cfg, a_format, shape, fold, groups, column_major, patches):
        out = _out_dtype(a, b)
        d, ctx.saved = cfg.op.forward(_view(a), a_format, _view(b), None if bias is None else _np(bias.reshape(1, -1)),
                                      None if c is None else _view(c), **_keys(cfg), float32=out == torch.float32,
                                      fold_a=fold, groups=groups, column_major=column_major, patches=patches)
        ctx.a_shape = a.shape if fold else None
        ctx.b_column_major = _column_major(b)
        ctx.cfg, ctx.has_c = cfg, c is not None
        ctx.dtypes = (a.dtype, b.dtype, None if bias is None else bias.dtype)
        # The result in the caller's shape, made here: a view of the GEMM's (B, m, n) would lose the
        # hooks on it when the caller modifies it in place (an in-place ReLU after a Linear).
        ctx.shape = d.shape
        return torch.from_numpy(d.reshape(shape or d.shape)).to(out)

    @staticmethod
    def backward(ctx, grad):
        cfg = ctx.cfg
        no_double_backward(f"a GEMM under {cfg.model}")
        need = ctx.needs_input_grad
        holder = getattr(cfg, "raw_input_grad", None)
        col2im = holder is not None and need[0]
        masks = _telemetry_wanted(cfg)
        g = cfg.op.backward(ctx.saved, _view(grad.reshape(ctx.shape)), need[0], need[1], need[2], **_keys(cfg),
                            raw=col2im, masks=masks, a_float32=ctx.dtypes[0] == torch.float32,
                            b_float32=ctx.dtypes[1] == torch.float32,
                            a_mask=getattr(cfg, "on_input_grad_flush", None) is not None,
                            a_column_major=ctx.a_shape is not None, b_column_major=ctx.b_column_major)
        if masks:
            output_grad_flushed(cfg, torch.from_numpy(g["dy_cast_flushed"]))
        da = db = dbias = None
        if need[0]:
            da = _unfolded(torch.from_numpy(g["da"]), ctx.a_shape).to(ctx.dtypes[0])
            if masks and getattr(cfg, "on_input_grad_flush", None) is not None:
                cfg.on_input_grad_flush(_unfolded(torch.from_numpy(g["da_flushed"]), ctx.a_shape))
            if col2im:
                holder.append(torch.from_numpy(g["da_raw"]))  # col2im's flush count (_Unfold)
        if need[1]:
            db = torch.from_numpy(g["db"]).to(ctx.dtypes[1])
            if masks and getattr(cfg, "on_b_grad_flush", None) is not None:
                cfg.on_b_grad_flush(torch.from_numpy(g["db_flushed"]))
        if need[2]:
            dbias = torch.from_numpy(g["bias"]).reshape(-1).to(ctx.dtypes[2])
            if masks and getattr(cfg, "on_bias_grad_flush", None) is not None:
                cfg.on_bias_grad_flush(torch.from_numpy(g["bias_flushed"]))
        dc = grad.reshape(ctx.shape) if ctx.has_c and need[3] else None
        return da, db, dbias, dc, None, None, None, None, None, None, None


def _column_major(b):
    """Whether B (1, k, n) lies column-major (nn.Linear's weight.t(), a convolution's weight rows): its
    gradient then comes back in that layout."""
    return b.shape[0] == 1 and b.stride(1) == 1 and b.stride(2) == b.shape[1] and b.shape[1] > 1


def _unfolded(t, a_shape):
    """A's gradient (1, N * m, k) of a folded A in A's shape (N, m, k)."""
    return t if a_shape is None else t.reshape(a_shape)


def _gemm(a, b, cfg, bias=None, c=None, shape=None, fold=False, groups=1, column_major=False, a_format=None,
          patches=None):
    """_Gemm on A (B, m, k), B (B, k, n); the result in `shape` (default (B, m, n)). fold: A (N, m, k)
    is one (N * m, k) matrix against B (1, k, n), read where it lies (no reshape copy of a view).
    groups: a grouped convolution's GEMMs in one call, A (.., groups * k), B (1, k, groups * n), group
    g's columns of each (the op core's forward with groups). column_major: the (1, m, n) result over
    column-major storage, for a caller that permutes it anyway (a convolution's (N * L, C) to (N, C, L)).
    a_format: the format of A's values where the caller knows better (A made from an input the op's
    cast_input rounded). patches: A is the folded im2col of this (x, kernel, dilation, padding, stride),
    which the op makes itself (conv2d's _patches; A is then a stand-in of its shape)."""
    return _Gemm.apply(a, b, bias, c, cfg, a_format or cfg.a_format or _dtype_format(a), shape, fold, groups,
                       column_major, patches)


def _dtype_format(t):
    return getattr(t, "_rpsim_format", "binary64" if t.dtype == torch.float64 else "binary32")


def _config(model, config):
    if config is not None:
        return config
    return GemmConfig(DEFAULT_MODEL if model is None else model)


def _check(*tensors):
    for name, t in tensors:
        if t is not None:
            check_tensor(t, name)


def mm(a, b, model=None, *, config=None):
    """a @ b for 2-D a (m, k) and b (k, n) under `model` (default tc:h100:fp16:fp32)."""
    _check(("a", a), ("b", b))
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"mm: needs 2-D tensors, got {a.dim()}-D and {b.dim()}-D")
    return _gemm(a.unsqueeze(0), b.unsqueeze(0), _config(model, config), shape=(a.shape[0], b.shape[1]))


def bmm(a, b, model=None, *, config=None):
    """a @ b for 3-D a (B, m, k) and b (B, k, n)."""
    _check(("a", a), ("b", b))
    if a.dim() != 3 or b.dim() != 3:
        raise ValueError(f"bmm: needs 3-D tensors, got {a.dim()}-D and {b.dim()}-D")
    return _gemm(a, b, _config(model, config))


def matmul(a, b, model=None, *, config=None):
    """torch.matmul's broadcasting rules (1-D operands included), each product emulated."""
    _check(("a", a), ("b", b))
    cfg = _config(model, config)
    va, vb = a.dim() == 1, b.dim() == 1
    a2 = a.unsqueeze(0) if va else a
    b2 = b.unsqueeze(-1) if vb else b
    batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    a3 = a2.expand(*batch, m, k).reshape(-1, m, k)
    b3 = b2.expand(*batch, k, n).reshape(-1, k, n)
    out = _gemm(a3, b3, cfg, shape=(*batch, m, n))
    if va:
        out = out.squeeze(-2)
    if vb:
        out = out.squeeze(-1)
    return out


def _scaled(out, c, beta, alpha):
    # beta/alpha other than 1 are elementwise ops after the GEMM, in the tensor's dtype. beta = 0
    # ignores C: torch's addmm "will not propagate nan and inf" from it (0 * inf would).
    return alpha * out if beta == 0 else alpha * out + beta * c


def addmm(input, mat1, mat2, *, beta=1, alpha=1, model=None, config=None):
    """beta input + alpha (mat1 @ mat2); with beta = alpha = 1, input is the GEMM's C (rounded to
    the model's output format and accumulated as the model adds C), as rpsim.gemm(A, B, C)."""
    _check(("input", input), ("mat1", mat1), ("mat2", mat2))
    cfg = _config(model, config)
    if beta == 1 and alpha == 1:
        c = input.expand(mat1.shape[0], mat2.shape[1]).unsqueeze(0)
        return _gemm(mat1.unsqueeze(0), mat2.unsqueeze(0), cfg, c=c, shape=(mat1.shape[0], mat2.shape[1]))
    return _scaled(mm(mat1, mat2, config=cfg), input, beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, model=None, config=None):
    """beta input + alpha (batch1 @ batch2), batched; input is C when beta = alpha = 1."""
    _check(("input", input), ("batch1", batch1), ("batch2", batch2))
    cfg = _config(model, config)
    if beta == 1 and alpha == 1:
        c = input.expand(batch1.shape[0], batch1.shape[1], batch2.shape[2])
        return _gemm(batch1, batch2, cfg, c=c)
    return _scaled(bmm(batch1, batch2, config=cfg), input, beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1, model=None, config=None):
    """beta input + alpha (mat @ vec): addmm on vec as a one-column matrix."""
    c = input.unsqueeze(-1) if input.dim() == 1 else input
    return addmm(c, mat, vec.unsqueeze(-1), beta=beta, alpha=alpha, model=model, config=config).squeeze(-1)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, model=None, config=None):
    """beta input + alpha sum_i (batch1[i] @ batch2[i]) as ATen computes it on CPU and CUDA alike
    (LinearAlgebra.cpp, addbmm_impl_): one addmm per batch into the running result, in batch order,
    each rounded to the output format; beta on the first only."""
    _check(("input", input), ("batch1", batch1), ("batch2", batch2))
    if batch1.dim() != 3 or batch2.dim() != 3 or batch1.shape[0] != batch2.shape[0]:
        raise ValueError(f"addbmm: needs 3-D batches of one count, got {tuple(batch1.shape)} and "
                         f"{tuple(batch2.shape)}")
    result = input.expand(batch1.shape[1], batch2.shape[2])
    if batch1.shape[0] == 0:
        return result * beta if beta != 0 else torch.zeros_like(result)
    for i in range(batch1.shape[0]):
        result = addmm(result, batch1[i], batch2[i], beta=beta if i == 0 else 1, alpha=alpha, model=model,
                       config=config)
    return result


def in_place(op):
    """x.op_(...) for a GEMM op: the op's result copied into x, which the caller keeps."""
    def run(self, *args, **kwargs):
        return self.copy_(op(self, *args, **kwargs))
    return run


def _telemetry(cfg, weight, b_to_weight, out_to_output=None):
    """cfg for one GEMM of an op whose B is `weight` seen through b_to_weight (a (1, k, n) mask to the
    weight's shape) and whose output reaches the op's through out_to_output (None: a reshape): the
    emulation's callbacks on_param_grad_flush(tensor, mask) and on_output_grad_flush(mask) get masks
    in the shapes of the tensors they are about. cfg itself where neither is set."""
    on_param, on_out = getattr(cfg, "on_param_grad_flush", None), getattr(cfg, "on_output_grad_flush", None)
    if on_param is None and (on_out is None or out_to_output is None):
        return cfg
    c = copy.copy(cfg)
    if on_param is not None:
        c.on_b_grad_flush = lambda m: on_param(weight, b_to_weight(m))
    if on_out is not None and out_to_output is not None:
        c.on_output_grad_flush = lambda m: on_out(out_to_output(m))
    return c


def _bias_telemetry(cfg, bias):
    on_param = getattr(cfg, "on_param_grad_flush", None)
    if on_param is None or bias is None:
        return cfg
    c = copy.copy(cfg)
    c.on_bias_grad_flush = lambda m: on_param(bias, m)
    return c


def _out_dtype(x, weight):
    """The op's result dtype: at least float32 (a half model's output may hold a binary32 format)."""
    return torch.promote_types(torch.promote_types(x.dtype, weight.dtype), torch.float32)


def linear(x, weight, bias=None, model=None, *, config=None):
    """F.linear(x, weight, bias) = x @ weight^T (+ bias), x of any leading shape; without bias the
    same bits as rpsim.gemm(x, weight.T); the bias in the GEMM's epilogue (the op core's)."""
    _check(("input", x), ("weight", weight), ("bias", bias))
    cfg = _config(model, config)
    lead = x.shape[:-1]
    cfg = _bias_telemetry(_telemetry(cfg, weight, lambda m: m[0].t()), bias)
    return _gemm(x.reshape(1, -1, x.shape[-1]), weight.t().unsqueeze(0), cfg, bias=bias, shape=(*lead, weight.shape[0]))

