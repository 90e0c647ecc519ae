"""A custom autograd Function in an emulated model (a user's torch.autograd.Function: a straight-through
estimator, a gradient reversal, the hand-written linear of PyTorch's "Extending PyTorch" note). Its forward's
ops run under the emulation's mode like any other op; its backward runs later, from backward(), after the
mode has ended, where its ops would take PyTorch's arithmetic unnoticed. So each training forward's graph
is walked: every node of a Function outside rpsim.torch is tagged with the emulation that built it, and the
Function's backward node class enters that emulation's mode around the user's backward, whose ops (a GEMM,
a product) then take the paths they take in a forward (summary(): "function backward"). A node without the
tag (the same Function in a model not emulated) runs as PyTorch runs it. torch.utils.checkpoint's Function
stays refused: its backward recomputes the forward (_unsupported.refuse_checkpoint)."""
import contextlib
import weakref

from torch._C import _get_function_stack_at, _len_torch_function_stack

from ._unsupported import refuse_checkpoint

# rpsim.torch's own autograd Functions: their backward is rpsim's already.
OWN_MODULE = "rpsim."
# PyTorch's own Functions that compute nothing: a module's full backward hook
# (register_full_backward_hook) passes the gradients through it to the user's hook unchanged.
IDENTITY_FUNCTIONS = frozenset({"torch.nn.modules._functions.BackwardHookFunction"})
_TAG = "_rpsim_emulation"  # on a node: a weak reference to the emulation whose forward made it


def tag_functions(emulation, outputs):
    """Walks the graph behind `outputs` (a training forward's tensors): refuses activation checkpointing;
    tags each custom Function's node with `emulation` and makes its class run the backward under it."""
    seen, todo = set(), [t.grad_fn for t in outputs]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        cls = getattr(node, "_forward_cls", None)
        if cls is not None:
            if cls.__module__ == "torch.utils.checkpoint":  # the reentrant form
                refuse_checkpoint()
            if not cls.__module__.startswith(OWN_MODULE) and _name(cls) not in IDENTITY_FUNCTIONS:
                _under_emulation(type(node))
                setattr(node, _TAG, weakref.ref(emulation))
        todo.extend(n for n, _ in node.next_functions)


def _name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def _under_emulation(node_cls):
    """node_cls.apply (what the autograd engine calls: BackwardCFunction.apply, the user's backward) entered
    under the tagging emulation's mode; once per class."""
    if "_rpsim_apply" in node_cls.__dict__:
        return
    apply, name = node_cls.apply, _name(node_cls._forward_cls)

    def run(node, *grads):
        ref = getattr(node, _TAG, None)
        emulation = ref() if ref is not None else None
        if emulation is None:
            return apply(node, *grads)
        emulation.counts["function backward"][name] += 1
        with emulation:
            return apply(node, *grads)
    node_cls._rpsim_apply, node_cls.apply = apply, run


def innermost_emulation():
    """The emulation whose mode is the innermost one entered (a decomposed op's function runs under it)."""
    for i in reversed(range(_len_torch_function_stack())):
        mode = _get_function_stack_at(i)
        if getattr(mode, "is_rpsim_emulation", False):
            return mode
    raise RuntimeError("rpsim.torch: no emulation's mode is active")


@contextlib.contextmanager
def inside(emulation, cast):
    """Under `emulation`'s mode as inside an op autocast runs whole on inputs it cast to `cast` (None: no
    cast; einsum's low format, cdist's binary32): its inner ops are not cast again, and in an fp32 one
    its GEMMs compute in binary32 (Emulation.gemm_config)."""
    before = emulation.autocast_whole
    emulation.autocast_whole = cast or before
    try:
        with emulation:
            yield
    finally:
        emulation.autocast_whole = before
