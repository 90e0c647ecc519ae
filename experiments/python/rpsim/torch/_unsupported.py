"""What rpsim.torch.emulate cannot put on rpsim's arithmetic, refused by name instead of run in
PyTorch's own arithmetic unnoticed: ops whose GEMMs are fused inside one PyTorch kernel (an LSTM's
gate GEMMs, a transposed convolution, einsum), a custom autograd Function (its backward runs after
the forward, outside the emulation), an in-place op whose result the emulation would round (the
rounded value cannot replace the tensor the caller keeps), a model or batch off the CPU (the C++
kernels read host memory), and a second derivative through rpsim's kernels (their backward is
computed outside autograd)."""
import torch


class UnsupportedError(ValueError):
    """A model, op or use that rpsim.torch does not emulate: the message names it and lists what is
    emulated (the op table's rows and the torch functions on rpsim's kernels)."""


# Torch functions with GEMMs inside one fused kernel, which a TorchFunctionMode sees whole (what
# the message suggests instead). PyTorch's autocast casts them as one op (autocast_mode.cpp).
FUSED_GEMMS = {
    "lstm": "a loop of linear layers and elementwise gates", "gru": "a loop of linear layers",
    "rnn_tanh": "a loop of linear layers", "rnn_relu": "a loop of linear layers",
    "lstm_cell": "linear layers and elementwise gates", "gru_cell": "linear layers and elementwise gates",
    "rnn_tanh_cell": "a linear layer and tanh", "rnn_relu_cell": "a linear layer and relu",
    "conv_transpose1d": "an upsampling and conv1d", "conv_transpose2d": "an upsampling and conv2d",
    "conv_transpose3d": "an upsampling and conv2d", "conv3d": "conv2d over slices",
    "bilinear": "matmul", "einsum": "matmul / bmm", "tensordot": "matmul", "chain_matmul": "matmul",
    "addbmm": "baddbmm and a sum", "multi_head_attention_forward": "linear, matmul and softmax "
    "(nanoGPT's explicit attention, as rpsim.torch._gpt)", "scaled_dot_product_attention": "matmul and softmax",
    "mv": "matmul", "addmv": "addmm", "dot": "matmul", "vdot": "matmul", "inner": "matmul", "kron": "matmul",
}

# rpsim.torch's own autograd Functions: their backward is rpsim's (the others' is not).
OWN_MODULE = "rpsim."


def check_device(tensors, what):
    """UnsupportedError naming the first tensor of `tensors` (name, tensor) off the CPU."""
    for name, t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            raise UnsupportedError(f"{what} {name} is on {t.device}: rpsim.torch emulates on the CPU (its C++ "
                                   f"kernels read host memory); move it with .cpu() (rpsim.torch.Telemetry and "
                                   f"capture_gemms watch a run on the GPU)")


def check_functions(outputs, supported):
    """UnsupportedError naming the autograd Functions outside rpsim.torch in the graph behind `outputs`."""
    seen, found, todo = set(), set(), [t.grad_fn for t in outputs if isinstance(t, torch.Tensor)]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        cls = getattr(node, "_forward_cls", None)
        if cls is not None and not cls.__module__.startswith(OWN_MODULE):
            found.add(f"{cls.__module__}.{cls.__qualname__}")
        todo.extend(n for n, _ in node.next_functions)
    if found:
        raise UnsupportedError(f"rpsim.torch.emulate: custom autograd Function {', '.join(sorted(found))} in the "
                               f"model's forward: its backward would run outside the emulation, in PyTorch's "
                               f"arithmetic; write it with torch ops ({supported})")


def refuse_fused(name, unclassified, supported):
    raise UnsupportedError(f"rpsim.torch.emulate: torch {name} runs its GEMMs inside one PyTorch kernel, out of "
                           f"reach of rpsim's accumulation models; write it with {FUSED_GEMMS[name]} (module types "
                           f"of this model without a row of the op table: {', '.join(unclassified) or 'none'}). "
                           f"{supported}")


def no_double_backward(what):
    """Called in a backward of rpsim's: under create_graph=True (grad mode on in backward) a second
    derivative would be taken through a result computed outside autograd."""
    if torch.is_grad_enabled():
        raise UnsupportedError(f"rpsim.torch: a second derivative (create_graph=True, double backward) through "
                               f"{what}: its backward runs on rpsim's kernels outside autograd, so it has no "
                               f"derivative of its own; take higher derivatives without emulate")


def check_trainer_args(model, optimizer, loss, scaler, histogram_steps):
    """TypeError naming Trainer's argument of the wrong kind (what it takes, the scaler table's names)."""
    from torch import nn
    from .. import _core
    from ._scaler import GradScaler
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: {type(model).__name__} is not a torch.nn.Module")
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


def check_batch(x, y):
    """TypeError naming a batch half that is not a tensor; UnsupportedError for one off the CPU."""
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"Trainer.step: {name} is a {type(t).__name__}, not a torch.Tensor")
    check_device([("x", x), ("y", y)], "Trainer.step's batch")


def check_emulate_args(model, policy, seed, policy_names):
    """TypeError naming emulate's argument of the wrong kind (a policy: the table's names)."""
    from torch import nn
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: {type(model).__name__} is not a torch.nn.Module")
    if not isinstance(policy, (str, dict)):
        raise TypeError(f"policy: {type(policy).__name__} is neither a name of the policy table "
                        f"({', '.join(policy_names)}) nor a policy object (dict)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise TypeError(f"seed: {seed!r} is not an integer >= 0")


def check_not_emulated(model):
    """ValueError for a model already under an Emulation (one at a time: a second would wrap the first)."""
    from ._emulate import Emulation  # (at call time: _emulate imports this module)
    owner = getattr(model.forward, "__self__", None)
    if isinstance(owner, Emulation):
        raise ValueError(f"model: already under emulate (policy {owner.policy['name']}); call its Emulation's "
                         "remove() first (Trainer.emulation.remove() for a Trainer's)")
