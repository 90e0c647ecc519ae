"""What rpsim.torch.emulate cannot put on rpsim's arithmetic, refused by name instead of run in
PyTorch's own arithmetic unnoticed: ops whose GEMMs are fused inside one PyTorch kernel
(torch.conv_tbc), activation checkpointing (its forward is recomputed in the backward, after the
emulation's mode has ended), a model or
batch off the CPU (the C++ kernels read host memory), and a second derivative through rpsim's
kernels (their backward is computed outside autograd). nn.LSTM, nn.GRU, nn.RNN, their cells,
nn.MultiheadAttention, nn.Bilinear, einsum, tensordot, inner, kron and multi_dot are
emulated as the ops they are made of (_decompose). Each message is a line or two: what, and what to write instead;
rpsim.torch.ops() and an Emulation's summary() list what is emulated."""
import inspect
import math
import os
import sys

import torch
from torch import nn

from torch.utils._python_dispatch import TorchDispatchMode

from ._marks import name_of, run_widened
from ._tables import ATEN_GEMMS, FUSED_GEMMS, FUSED_MODULES  # noqa: F401 (re-exported)


# What a complex parameter or a complex GEMM is told to write instead.
COMPLEX_FIX = "write the complex product as real ones (ac - bd, ad + bc)"


class UnsupportedError(ValueError):
    """A model, op or use that rpsim.torch does not emulate: the message names it and says what to
    write instead."""


# Torch functions with GEMMs inside one fused kernel, which a TorchFunctionMode sees whole (what the
# message suggests instead), and their modules: rows of the C++ table of torch names (_tables).
_LISTS = "rpsim.torch.ops() lists the op table, an Emulation's summary() the path each op took"

# torch.utils.checkpoint recomputes its forward during the backward, after emulate's mode has ended:
# the recomputed ops would run in PyTorch's arithmetic (and the non-reentrant form's saved-tensor
# count then differs from the forward's: PyTorch 1.13 failed with an IndexError in inner_pack).
_CHECKPOINT_FILE = os.path.join("torch", "utils", "checkpoint.py")


def check_modules(model):
    """UnsupportedError naming the first module of `model` whose forward is a fused-GEMM op, that is
    TorchScript, or whose parameters a lazy module has not made yet (nothing to round or hook)."""
    for name, m in model.named_modules():
        if any(nn.parameter.is_lazy(t) for t in (*m.parameters(recurse=False), *m.buffers(recurse=False))):
            raise UnsupportedError(f"rpsim.torch.emulate: module {name or type(m).__name__} ({type(m).__name__}) "
                                   "has uninitialized parameters (a lazy module): run the model once on a batch "
                                   "(model(x)) before emulate, or write it with its sizes")
        if isinstance(m, torch.jit.ScriptModule):
            raise UnsupportedError(f"rpsim.torch.emulate: module {name or type(m).__name__} is TorchScript "
                                   "(torch.jit.script / trace), whose ops run in TorchScript's interpreter where no "
                                   "Python dispatch reaches them; emulate the eager nn.Module and script it without "
                                   "emulate")
        op = FUSED_MODULES.get(type(m))
        if op is not None:
            raise UnsupportedError(f"rpsim.torch.emulate: module {name or type(m).__name__} ({type(m).__name__}) "
                                   f"runs torch {op}, whose GEMMs are one PyTorch kernel, out of reach of rpsim's "
                                   f"accumulation models; write it with {FUSED_GEMMS[op]}")


def _sparse_embeddings(model):
    """(name, module) of the embeddings with sparse=True (sparse gradients)."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse]


def check_dtypes(model, policy_name, fmt):
    """ValueError naming the parameter dtypes of `model` that cannot hold the policy's weight format
    `fmt` (a float32 model under fp64, a float16 one under fp16-amp's binary32 master weights)."""
    from ._marks import holds
    narrow = [(n, m) for n, m in _sparse_embeddings(model) if m.weight.dtype in (torch.float16, torch.bfloat16)]
    if narrow:  # its ops run on a float32 copy of the table, whose cast back cannot carry a sparse gradient
        name, m = narrow[0]
        raise UnsupportedError(f"rpsim.torch.emulate: module {name}: a {str(m.weight.dtype)[6:]} embedding with "
                               "sparse=True: PyTorch's cast of its table has no sparse gradient; set sparse=False "
                               "(the same values, dense) or keep the model in float32")
    for name, p in model.named_parameters():  # (no format of rpsim's holds its values)
        if p.is_complex():
            raise UnsupportedError(f"rpsim.torch.emulate: parameter {name} is {str(p.dtype)[6:]}: rpsim's formats are "
                                   "real, and its GEMMs too; keep the real and imaginary parts as real parameters and "
                                   + COMPLEX_FIX)
    bad = sorted({str(p.dtype) for p in model.parameters() if not holds(p.dtype, fmt)})
    if not bad:
        return
    fix = "model.double()" if fmt == "binary64" else "model.float()"
    raise ValueError(f"policy {policy_name} stores {fmt} weights, which a model of {', '.join(bad)} parameters "
                     f"cannot hold: call {fix} first" + ("" if fmt == "binary64" else "; a float16 model runs under "
                                                         "fp16-pure, a bfloat16 one under bf16-pure, whose weights "
                                                         "those dtypes hold"))


def check_device(tensors, what):
    """UnsupportedError naming the first tensor of `tensors` (name, tensor) off the CPU."""
    for name, t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            raise UnsupportedError(f"{what} {name} is on {t.device}: rpsim.torch emulates on the CPU (its C++ "
                                   f"kernels read host memory); move it with .cpu() (rpsim.torch.Telemetry and "
                                   f"capture_gemms watch a run on the GPU)")


def check_not_checkpointed():
    """UnsupportedError when an op runs inside torch.utils.checkpoint (either form): its forward would be
    recomputed in the backward, outside the emulation. Called during the first training forward only
    (it walks the Python stack)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_CHECKPOINT_FILE):
            refuse_checkpoint()
        frame = frame.f_back


def refuse_checkpoint():
    raise UnsupportedError("rpsim.torch.emulate: torch.utils.checkpoint in the model's forward: it recomputes the "
                           "forward during the backward, outside the emulation, in PyTorch's arithmetic; train "
                           "without activation checkpointing while emulating (HF models: "
                           "gradient_checkpointing_disable())")


def refuse_pickle():
    raise UnsupportedError("rpsim.torch: torch.save / pickle of a model under emulate (its hooks and forward hold "
                           "the emulation's C++ state): save model.state_dict(), or call the Emulation's remove() "
                           "first (Trainer.emulation.remove())")


def refuse_fused(name):
    raise UnsupportedError(f"rpsim.torch.emulate: torch {name} runs its GEMMs inside one PyTorch kernel, out of "
                           f"reach of rpsim's accumulation models; write it with {FUSED_GEMMS[name]} ({_LISTS})")


def no_double_backward(what):
    """Called in a backward of rpsim's: under create_graph=True (grad mode on in backward) a second
    derivative would be taken through a result computed outside autograd."""
    if torch.is_grad_enabled():
        raise UnsupportedError(f"rpsim.torch: a second derivative (create_graph=True, double backward) through "
                               f"{what}: its backward runs on rpsim's kernels outside autograd, so it has no "
                               f"derivative of its own; take higher derivatives without emulate")


def check_trainer_args(model, optimizer, loss, scaler, histogram_steps, max_grad_norm=0.0):
    """TypeError naming Trainer's argument of the wrong kind (what it takes, the scaler table's names),
    ValueError for one of the right kind out of range."""
    from .. import _core
    from ._scaler import GradScaler
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: {type(model).__name__} is not a torch.nn.Module")
    sparse = _sparse_embeddings(model)
    if sparse:  # its columns (underflow, stalled updates, the norm) read dense gradients
        raise UnsupportedError(f"rpsim.torch.Trainer: module {sparse[0][0]}: an embedding with sparse=True gives "
                               "sparse gradients, which Trainer's telemetry does not read; set sparse=False (the "
                               "same values, dense), or run emulate() in your own loop (rpsim.torch.GradScaler "
                               "unscales sparse gradients)")
    if isinstance(optimizer, torch.optim.Optimizer) or (optimizer is not None and not callable(optimizer)):
        raise TypeError(f"optimizer: {type(optimizer).__name__} is not a function of the parameters making the "
                        "optimizer (lambda params: torch.optim.SGD(params, lr=0.1)): Trainer builds one for the "
                        "model and one for its FP64 shadow")
    if loss is not None and not callable(loss):
        raise TypeError(f"loss: {loss!r} is not a function (logits, labels) -> loss (torch.nn.functional."
                        "cross_entropy, rpsim.torch.RpsimLoss('cross_entropy', policy))")
    if scaler is not None and not isinstance(scaler, (str, GradScaler)):
        raise TypeError(f"scaler: {type(scaler).__name__} is neither a rpsim.torch.GradScaler nor a name of the "
                        f"loss-scaler table ({', '.join(_core._torch_loss_scalers())})")
    try:
        steps = list(histogram_steps)
    except TypeError:
        steps = [histogram_steps]
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        raise TypeError(f"histogram_steps: {histogram_steps!r} is not a collection of step numbers (int)")
    if isinstance(max_grad_norm, bool) or not isinstance(max_grad_norm, (int, float)):
        raise TypeError(f"max_grad_norm: {max_grad_norm!r} is not a number (> 0: clip to that norm; 0: no clipping)")
    if not (math.isfinite(max_grad_norm) and max_grad_norm >= 0):
        raise ValueError(f"max_grad_norm: {max_grad_norm!r} is not a finite number >= 0 (> 0: clip to that norm, "
                         "as rpsim train's optimizer.max_grad_norm; 0: no clipping)")


def check_batch(x, y, who="Trainer.step", sizes=True):
    """TypeError naming a batch half that is not a tensor (x may be a tuple or list of the model's
    arguments or a dict of its keyword arguments, the first a tensor), ValueError for an empty batch
    or (sizes: where Trainer reads the batch along the first dimension) halves of different sizes;
    UnsupportedError for one off the CPU."""
    parts = list(x.items()) if isinstance(x, dict) else list(enumerate(x)) if isinstance(x, (tuple, list)) else None
    if parts is not None:
        if not parts or not isinstance(parts[0][1], torch.Tensor):
            raise TypeError(f"{who}: x is a {type(x).__name__} whose first entry is not a torch.Tensor; x is a "
                            "tensor, a tuple of the model's arguments or a dict of its keyword arguments, the "
                            "first the batch's samples")
        check_device([(f"x[{k!r}]", t) for k, t in parts], f"{who}'s batch")
        x = parts[0][1]
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{who}: {name} is a {type(t).__name__}, not a torch.Tensor")
    check_device([("x", x), ("y", y)], f"{who}'s batch")
    for name, t in (("x", x), ("y", y)):
        if t.dim() == 0 or t.numel() == 0:
            raise ValueError(f"{who}: {name} of shape {tuple(t.shape)} holds no sample; a batch is at least "
                             "one sample along its first dimension")
    per_token = y.dim() == 1 and x.dim() >= 2 and y.numel() == x.shape[0] * x.shape[1]  # (the CLI's gpt batches)
    if sizes and x.shape[0] != y.shape[0] and not per_token:
        raise ValueError(f"{who}: x holds {x.shape[0]} samples (shape {tuple(x.shape)}) but y {y.shape[0]} "
                         f"(shape {tuple(y.shape)}); the first dimension is the batch, as gradient accumulation and "
                         "rpsim's own losses read it (or y holds one target per token of x, flattened; a time-major "
                         "model trains with a loss= of yours, without gradient accumulation)")


def _parts(out):
    """What a model output holds, for a message: a mapping's keys, a sequence's length."""
    if isinstance(out, dict):
        return f" (keys {', '.join(repr(k) for k in out)})"
    return f" of {len(out)}" if isinstance(out, (tuple, list)) else ""


def check_output_arg(output):
    """TypeError for Trainer's output= of the wrong kind."""
    if output is not None and not isinstance(output, (str, int)) and not callable(output):
        raise TypeError(f"output: {output!r} is neither a key, an index nor a function picking the logits from "
                        "what the model returns (output='out' for torchvision's segmentation models)")


def check_scheduler_arg(scheduler, lr_schedule):
    """TypeError for Trainer's scheduler= of the wrong kind, ValueError beside lr_schedule=."""
    if scheduler is None:
        return
    if not callable(scheduler) or hasattr(scheduler, "get_last_lr"):
        raise TypeError(f"scheduler: {type(scheduler).__name__} is not a function of the optimizer making the LR "
                        "scheduler (lambda opt: torch.optim.lr_scheduler.StepLR(opt, 10)): Trainer makes one for "
                        "the model's optimizer and one for its FP64 shadow's")
    if lr_schedule is not None:
        raise ValueError("scheduler and lr_schedule both set the learning rate: give one")


def check_optimizer(opt):
    """TypeError for an optimizer whose step needs a closure (torch.optim.LBFGS re-evaluates the loss
    inside step): Trainer steps it as a plain loop steps SGD or Adam, with none."""
    closure = inspect.signature(opt.step).parameters.get("closure")
    if closure is not None and closure.default is inspect.Parameter.empty:
        raise TypeError(f"optimizer: {type(opt).__name__}.step(closure) evaluates the model again inside its "
                        "step, which Trainer.step (one forward and backward per step) does not give; use an "
                        "optimizer stepped without a closure, or emulate() in your own loop")
    return opt


def check_same_parameters(model, made_with):
    """UnsupportedError naming the parameters of `model` that are not those Trainer() was made with
    (`made_with`: {id: name}): a module replaced or added since (a new head) is in no optimizer, no
    shadow and no emulation, and the shadow's old head failed with "Target 3 is out of bounds"."""
    now = {id(p): n for n, p in model.named_parameters()}
    if now.keys() != made_with.keys():
        new = [n for i, n in now.items() if i not in made_with]
        gone = [n for i, n in made_with.items() if i not in now]
        raise UnsupportedError(f"rpsim.torch.Trainer.step: the model's parameters changed since Trainer() (new: "
                               f"{', '.join(new) or 'none'}; gone: {', '.join(gone) or 'none'}): its optimizer, FP64 "
                               "shadow and emulation hold the old ones; make the Trainer once the model is final")


def check_output(out, who="Trainer.step", output=None, any_output=False):
    """The logits of a model output: out itself, or what Trainer's output= picks from it (a key of a
    dict, an index of a tuple, a function); TypeError naming an output the loss cannot take (a dict, a
    tuple) with the output= that fixes it, ValueError for an output= that picks nothing. any_output (a
    loss of the user's, which may take the whole output): no tensor needed."""
    if output is not None:
        shown = getattr(output, "__name__", type(output).__name__) if callable(output) else repr(output)
        try:
            picked = output(out) if callable(output) else out[output]
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"{who}: output={shown} picks nothing from the model's {type(out).__name__}"
                             f"{_parts(out)}: {type(e).__name__} {e}") from None
        if not isinstance(picked, torch.Tensor) and not any_output:
            raise TypeError(f"{who}: output={shown} picked a {type(picked).__name__} from the model's "
                            f"{type(out).__name__}{_parts(out)}, not a tensor of logits")
        return picked
    if not isinstance(out, torch.Tensor) and not any_output:
        first = next(iter(out), None) if isinstance(out, dict) else (0 if isinstance(out, (tuple, list)) else None)
        fix = f"Trainer(..., output={first!r}) picks" if first is not None else "a wrapper module returning"
        raise TypeError(f"{who}: the model returned a {type(out).__name__}{_parts(out)}, not a tensor; Trainer "
                        f"passes the logits to the loss as its first argument: {fix} them")
    return out


def check_emulate_args(model, policy, seed, policy_names):
    """TypeError naming emulate's argument of the wrong kind (a policy: the table's names)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: {type(model).__name__} is not a torch.nn.Module")
    if not isinstance(policy, (str, dict)):
        raise TypeError(f"policy: {type(policy).__name__} is neither a name of the policy table "
                        f"({', '.join(policy_names)}) nor a policy object (dict)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise TypeError(f"seed: {seed!r} is not an integer >= 0")


def check_not_emulated(model):
    """ValueError for a model already under an Emulation (one at a time: a second would wrap the first)."""
    owner = getattr(model.forward, "__self__", None)
    if getattr(owner, "is_rpsim_emulation", False):  # an Emulation (named by its flag: no import up)
        raise ValueError(f"model: already under emulate (policy {owner.policy['name']}); call its Emulation's "
                         "remove() first (Trainer.emulation.remove() for a Trainer's)")


def check_kahan_optimizer(policy_name, opt):
    """A Kahan-compensated policy's optimizer must carry the compensation (rpsim.torch.SGD, AdamW)."""
    if not hasattr(opt, "kahan_format"):
        raise ValueError(f"policy {policy_name}: Kahan-compensated updates need the optimizer to carry the "
                         f"compensation: use rpsim.torch.SGD, not {type(opt).__name__}")


class GemmWatch(TorchDispatchMode):
    """Active during an emulated forward: a GEMM of PyTorch's own (a dispatcher op of ATEN_GEMMS: an mm,
    cdist's _euclidean_dist, affine_grid's generator) is an op computing inside one PyTorch kernel
    what rpsim's accumulation models should: refused, naming the torch function the emulation ran
    natively (run), not run in PyTorch's arithmetic unnoticed. rpsim's kernels reach no such op, and
    ops on meta tensors (torch's own argument checks) compute nothing. It watches the first forward
    with gradients and the first without (a Python dispatch of every op costs 4-15 % of a step; a
    branch a model first takes at a later step is not watched)."""

    def __init__(self):
        super().__init__()
        self.calling, self.watched, self.armed = None, set(), []

    def __enter__(self):
        key = torch.is_grad_enabled()
        self.armed.append(None if key in self.watched else key)
        return self if self.armed[-1] is None else super().__enter__()

    def __exit__(self, exc_type, *exc):
        key = self.armed.pop()
        if key is None:
            return False
        if exc_type is None:  # (a forward that raised is watched again)
            self.watched.add(key)
        return super().__exit__(exc_type, *exc)

    def run(self, func, args, kwargs):
        """func(*args, **kwargs) in PyTorch (run_widened), its name the one a GEMM inside it is refused by."""
        self.calling = name_of(func)
        try:
            return run_widened(func, args, kwargs)
        finally:
            self.calling = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        op = getattr(getattr(func, "_schema", None), "name", "")  # (torch 2's higher-order ops have none)
        if op in ATEN_GEMMS and not any(isinstance(t, torch.Tensor) and t.is_meta for t in args):
            what = f"torch {self.calling}" if self.calling else "an op rpsim.torch did not see (run with torch function modes off)"
            raise UnsupportedError(f"rpsim.torch.emulate: {what} runs a GEMM ({op}) inside PyTorch's own kernel, "
                                   f"out of reach of rpsim's accumulation models; write it with torch.matmul and "
                                   f"elementwise ops ({_LISTS})")
        return func(*args, **(kwargs or {}))
