"""In-place ops under emulation: the result rounded to the op's format goes back into the tensor the
caller keeps (x.mul_(y), x.sigmoid_(), F.silu(x, inplace=True)), without moving the tensor's version
past what autograd saved."""
import torch

from ._marks import WIDE, map_tensors, mark, tensors
from ._tables import LAYOUT

# RESULT_SAVING (a class of the C++ torch-name table, torch_names.cpp): in-place ops whose backward
# reads their own result (PyTorch's derivatives.yaml: `result`). Rounding that result in place after the
# op moved its version past the saved one ("one of the variables needed for gradient computation has
# been modified by an inplace operation") and the step stopped. They run as their out-of-place twin,
# whose result is rounded and then copied into the tensor, as any in-place op's value: the same values
# and the same gradient chain as x.mul_(y)'s below. (relu_ is a layout op: _layout leaves a wide result
# alone.)


def in_place_rounded(em, name, args, kwargs):
    """A RESULT_SAVING op on args[0] under Emulation em: None where its format is wide (the op then
    runs as it is, nothing rounded after it), else args[0] holding the rounded result."""
    return _as_twin(em, name, args, kwargs, lambda: em._watch.run(getattr(torch.Tensor, name[:-1]), args, kwargs))


def functional_in_place(em, name, func, args, kwargs):
    """F.silu(x, inplace=True), F.elu(x, inplace=True), F.dropout(..., inplace=True): x holds the
    result rounded to the op's format, as after x.sigmoid_(), and is returned (a caller that drops the
    return value, as a plain loop may, kept the unrounded binary32 result in x). None where the format
    is wide: the op then runs as it is. The op runs out of place on a copy of x, so that neither an op
    whose backward reads its input (silu, hardswish) nor one that reads its result (elu_, leaky_relu_)
    sees x's version move when the rounded result goes back in; x's version moves once, as in PyTorch."""
    if name in LAYOUT:
        return None  # F.relu(x, inplace=True): nothing to round (_layout)
    return _as_twin(em, name, args, kwargs,
                    lambda: em._watch.run(func, (args[0].clone(),) + tuple(args[1:]), {**kwargs, "inplace": False}))


def _as_twin(em, name, args, kwargs, twin):
    """args[0] holding twin()'s result (the op run out of place) rounded to the op's format; None where
    args[0] is no floating tensor or the format is wide."""
    x = args[0] if args else None
    if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
        return None
    fmt = em.op_format(name, list(tensors((args, kwargs))))  # the tensors of args, then of kwargs
    if fmt in WIDE:
        return None
    em.counts["binary32"][name] += 1
    return _into(x, fmt, em._output(twin(), fmt))


def _no_longer_layer_output(x):
    for key in ("_rpsim_output", "_rpsim_src", "_rpsim_view_of"):
        x.__dict__.pop(key, None)
    return x


def _into(x, fmt, rounded):
    """x (an in-place op's tensor, which the caller keeps) holding `rounded`, marked fmt; x is no longer
    a layer's output."""
    return mark(_no_longer_layer_output(x).copy_(rounded), fmt)


def round_result(em, name, out, fmt, rounded=None):
    """An op's result rounded to fmt under Emulation em. An in-place op's (x.mul_(y)) goes back into x,
    which the caller keeps, and x is no longer a layer's output; `rounded`: that value, made already."""
    if name.endswith("_") and not name.startswith("_") and isinstance(out, torch.Tensor):
        if fmt in WIDE:
            return _no_longer_layer_output(out)
        return _into(out, fmt, em._output(out, fmt) if rounded is None else rounded)
    return map_tensors(lambda t: em._output(t, fmt), out)


def rounded_output(em, out, fmt, in_place):
    """out in an op-table row's format (a fixed-point ReLU's): in place for an in-place op, where a wide
    format leaves out as it is (copying it onto itself moved its version past relu_'s saved result)."""
    if not in_place:
        return em._output(out, fmt)
    return out if fmt in WIDE else out.copy_(em._output(out, fmt))
