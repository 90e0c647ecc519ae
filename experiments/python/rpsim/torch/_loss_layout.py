"""How Trainer hands a model's output and class-label targets to the loss and to the accuracy.

rpsim's own losses (the default cross-entropy, RpsimLoss) take a sequence model's (B, T, V) logits
flattened, as `rpsim train`'s GPT; a loss the user wrote gets the model's output as their own loop
gives it (one that transposed (B, T, V) to PyTorch's (B, V, T) failed on a flattened output), also
one that is no tensor (googlenet's GoogLeNetOutputs in training, for a loss adding its auxiliary
heads); where it fails on a (B, T, V) output or on one that is no tensor, the error says what to do.
Float targets (a regression loss) come in the output's floating dtype (the shadow's: float64)."""
import torch

from ._marks import tensors

_WHO = "rpsim.torch.Trainer"


def loss_of(fn, out, y, own_layout):
    """The step's loss fn(out, y): float targets cast to the output's dtype, class labels by class_loss."""
    if y.is_floating_point():
        return fn(out, y.to(next((t.dtype for t in tensors(out) if t.is_floating_point()), y.dtype)))
    return class_loss(fn, out, y, own_layout)


def class_layout(out, y):
    """(out, y, class_dim) as rpsim's own losses and the accuracy take them, for class-index targets.
    - out (N, C): as it is.
    - A sequence model's logits (B, T, V) against y (B, T), or (B * T,) as the CLI's gpt batches:
      flattened to (B * T, V) against (B * T,), the class dimension last (rpsim train's GPT).
    - PyTorch's own layout, the class dimension second: (N, C, d1, ...) against y (N, d1, ...), a
      segmentation net's. Handed to the loss as it is, as F.cross_entropy takes it.
    An output that fits both layouts takes the sequence layout if it is 3-D, PyTorch's otherwise.
    Any other pair goes to the loss flattened, whose error then names the shapes."""
    if out.dim() <= 2:
        return out, y, -1
    last = (y.dim() == 1 and out.shape[:-1].numel() == y.numel()) or y.shape == out.shape[:-1]
    second = y.shape == out.shape[:1] + out.shape[2:]
    if second and not (last and out.dim() == 3):
        return out, y, 1
    return out.flatten(0, -2), y.flatten(), -1


def class_loss(fn, out, y, own_layout):
    """fn(out, y) for class-index targets y: flattened first for rpsim's own losses (own_layout)."""
    if own_layout:
        out, y, _ = class_layout(out, y)
        return fn(out, y)
    try:
        return fn(out, y)
    except (RuntimeError, ValueError, IndexError, TypeError, AttributeError) as e:
        if not isinstance(out, torch.Tensor):
            shape, fix = type(out).__name__, "Trainer(..., output=0) (a key, an index, a function) picks the " \
                "logits for it"
        elif class_layout(out, y)[0] is out:  # no (B, T, V) layout: the loss's own error says it all
            raise
        else:
            shape, fix = tuple(out.shape), "flatten them in the loss (out.flatten(0, -2), y.flatten()), or leave " \
                "loss= out for rpsim's cross-entropy, which does"
        raise type(e)(f"{e}\n{_WHO}: your loss got the model's output {shape} as it is, against y {tuple(y.shape)}; "
                      f"{fix}") from e
