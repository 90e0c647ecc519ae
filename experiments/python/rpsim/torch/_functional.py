"""Telemetry's view of matmul-class functions called inside a model's forward (attention's
q @ k^T, att @ v, an einsum): their outputs' gradients, which no module hook sees. A
TorchFunctionMode is entered only for the forward passes of recorded steps, so the other steps
pay one integer compare."""
from torch.overrides import TorchFunctionMode

# torch functions whose output is a GEMM's: Tensor.__matmul__ arrives as matmul. F.linear is
# left out: inside nn.Linear it is the module's own output, hooked already.
FUNCTIONS = {"matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "__matmul__", "__rmatmul__"}


class _Mode(TorchFunctionMode):
    def __init__(self, telemetry):
        super().__init__()
        self.tel = telemetry

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name in FUNCTIONS and getattr(out, "requires_grad", False):
            where = self.tel._stack[-1] if self.tel._stack else "model"
            i = self.tel._fcount.get((where, name), 0)
            self.tel._fcount[(where, name)] = i + 1
            key = f"{where}.{name}#{i}"
            out.register_hook(lambda g, key=key: self.tel._on_grad(key, g))
        return out


def attach_functional(tel, named):
    """Hooks that keep the stack of module names and run the mode for the root's forward."""
    tel._stack, tel._fcount, tel._fmode = [], {}, None
    handles = []

    def root_pre(module, inputs):
        if tel._recording() and tel._fmode is None:
            import torch
            if torch.is_grad_enabled():
                tel._fcount = {}
                tel._fmode = _Mode(tel)
                tel._fmode.__enter__()

    def root_post(module, inputs, output):
        if tel._fmode is not None:
            tel._fmode.__exit__(None, None, None)
            tel._fmode = None

    def push(name):
        return lambda module, inputs: tel._stack.append(name) if tel._fmode is not None else None

    def pop(module, inputs, output):
        if tel._fmode is not None and tel._stack:
            tel._stack.pop()

    root = named[""]
    handles.append(root.register_forward_pre_hook(root_pre))
    for n in named:  # every module, hooked or not: the name says where the function was called
        if not n:
            continue
        handles.append(named[n].register_forward_pre_hook(push(n)))
        handles.append(named[n].register_forward_hook(pop))
    handles.append(root.register_forward_hook(root_post))
    return handles
