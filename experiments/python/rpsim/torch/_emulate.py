"""rpsim.torch.emulate: a user's nn.Module under one of `rpsim train`'s precision policies.

The policy rows and the op table's autocast classes come from the C++ tables (rpsim._core
._torch_policy / _torch_ops), the ones the CLI reads. Three paths per op, listed by summary():
  rpsim kernel   linear, conv1d/conv2d, matmul/mm/bmm/addmm/baddbmm: rpsim's GEMMs under the op's
                 rule (compute, output, backward formats, accumulation model), as `rpsim train`;
                 layer_norm and gelu on the CLI's C++ layers where they express the call (_layers);
  binary32       every other floating op: run by PyTorch in binary32 on the values of its inputs,
                 its output (and the gradient arriving at it) rounded to the format its autocast
                 class gives it: the low format (lower-precision list), binary32 (fp32 list), or the
                 promoted format of its inputs (neither list), as torch.autocast does;
  layout         views, copies and shape ops: no arithmetic, the format of the input kept.
What none of the paths can carry (an LSTM's fused GEMMs, a custom autograd Function, a GPU tensor, a
second derivative) raises UnsupportedError naming it (_unsupported); an in-place op keeps its rounding.
"""
import collections
import copy
import functools

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .. import _core
from . import _blockscale, _layers, _ops
from ._quantize import quantize, round_tensor
from ._unsupported import FUSED_GEMMS, check_device, check_emulate_args, check_functions, check_not_emulated, \
    refuse_fused
from ._tables import KERNELS, LAYOUT, MODULE_OPS, TORCH_FP32, TORCH_LOWER_PRECISION, ops, policies, \
    supported  # noqa: F401

_WIDE = {"binary32", "binary64"}


def _format_of(t, default):
    return getattr(t, "_rpsim_format", default)


def _mark(t, fmt):
    if isinstance(t, torch.Tensor) and t.is_floating_point():
        try:
            t._rpsim_format = fmt
        except (AttributeError, RuntimeError):
            pass
    return t


@functools.lru_cache(maxsize=None)
def _promote(a, b):
    """PyTorch's type promotion over the formats rpsim tracks: the op core's rule (the one that holds
    the other, else binary32, else binary64), as rpsim train's layers promote."""
    return a if a == b else _core._promote_formats(a, b)


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _map_tensors(fn, obj):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(fn, o) for o in obj)
    return obj


def _name(func):
    return getattr(func, "__name__", None) or str(func)


class Emulation(TorchFunctionMode):
    """What emulate() returns: the model's op-level emulation, active during its forward pass.
    summary() lists the ops per path and the module types the policy could not classify;
    optimizer(opt) wraps an optimizer so updated parameters are stored in the policy's format."""

    def __init__(self, model, policy, accumulation, seed):
        super().__init__()
        self.model, self.seed = model, seed
        # The C++ kernels read host memory: parameters, buffers and batches on the CPU.
        check_device(model.named_parameters(), "model parameter")
        check_device(model.named_buffers(), "model buffer")
        self._functions_checked = False
        self.policy, self.policy_spec = _core._torch_policy(policy), policy  # (the C++ kernels parse the spec)
        scaling = self.policy.get("fp8", {}).get("scaling")
        if scaling not in (None, "none", "delayed", "current") + _blockscale.SCALINGS:
            raise ValueError(f"policy {self.policy['name']}: fp8.scaling '{scaling}' is not emulated by "
                             f"rpsim.torch (delayed, current, mx and nvfp4 are; run it with `rpsim train`)")
        narrow = sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.float64})
        if self.policy["weights"] == "binary64" and narrow:
            raise ValueError(f"policy {self.policy['name']} stores binary64 weights, which a model of "
                             f"{', '.join(narrow)} parameters cannot hold: call model.double() first")
        self.high_precision_layers = _blockscale.high_precision_layers(model, self.policy)
        self.layer_ops = {}  # layer -> its _GemmOp (FP8 scaling state and statistics persist per layer)
        self.table = ops()
        self.autocast = self.policy["autocast"]["format"]
        self.base = self.policy["data"]
        self.accumulation = accumulation
        self.counts = {"rpsim kernel": collections.Counter(), "binary32": collections.Counter(),
                       "layout": collections.Counter()}
        self.calls = 0
        self.step = 0
        containers = (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.Identity)
        self.unclassified = sorted({type(m).__name__ for m in model.modules() if not list(m.children())
                                    and type(m) not in MODULE_OPS and not isinstance(m, containers)})
        self._configs = {}
        # Telemetry: per layer (the module owning a parameter), the entries roundings flushed.
        # (the root module's own parameters under its type name, as Trainer names the layer)
        self.param_layer = {id(p): name.rsplit(".", 1)[0] if "." in name else type(model).__name__
                            for name, p in model.named_parameters()}
        self.flush_log = collections.defaultdict(dict)
        self.embedding_tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        # Counting flushed entries costs a pass over each gradient: only for a Trainer's telemetry.
        self.telemetry = False
        # The mode is active inside the model's forward only, and left even when forward raises.
        self._forward = model.forward
        model.forward = self._emulated_forward
        self._hooks = []
        self._store_parameters()
        for p in model.parameters():
            self._hooks.append(p.register_hook(self._gradient_hook(p)))
            p._rpsim_grad_format = self.policy["gradients"]  # GradScaler.unscale_ rounds to it

    # -- formats ---------------------------------------------------------------------------------
    def rule(self, op):
        r = self.policy["ops"].get(op, "follow")
        return None if r == "follow" else r

    def _op(self, op, high_precision=False):
        """The op core's GEMM op of `op`'s rule (its accumulation replaced by emulate's), resolved once."""
        return _core._GemmOp.of_policy(self.policy_spec, op, high_precision, self.accumulation)

    def gemm_config(self, op, input_format):
        key = (op, input_format)
        if key not in self._configs:
            if self.accumulation is not None:  # as the config parser checks ops.OP.accumulation
                _blockscale.check_accumulation(self.policy_spec, self.accumulation, [op])
            g = self._op(op)
            cfg = _ops.GemmConfig(g.model, seed=self.seed, op=g)
            cfg.a_format = input_format  # a rule that follows its inputs computes in their format
            self._configs[key] = cfg
        return self._configs[key]

    def promoted(self, inputs):
        formats = [_format_of(t, self.base) for t in inputs if t.is_floating_point()]
        promoted = formats[0] if formats else self.base
        for f in formats[1:]:
            promoted = _promote(promoted, f)
        return promoted

    def op_format(self, op, inputs):
        """The output format of `op` (a table row or a torch function name) on tensors `inputs`."""
        promoted = self.promoted(inputs)
        if op in self.table:
            r = self.rule(op)
            return promoted if r is None else r["output"]
        if self.autocast is None:
            return self.base if promoted not in _WIDE or self.base in _WIDE else promoted
        if op in TORCH_LOWER_PRECISION:
            return self.autocast
        if op in TORCH_FP32:
            return "binary32"
        return promoted

    # -- the forward pass ------------------------------------------------------------------------
    def _emulated_forward(self, *args, **kwargs):
        self.calls = 0
        # The input batch in the policy's data format (bf16-pure: bfloat16).
        args = _map_tensors(self._round_input, args)
        with self:
            out = self._forward(*args, **kwargs)
        if not self._functions_checked and torch.is_grad_enabled():
            # A custom autograd Function's forward ops run under the mode, its backward after it (in
            # PyTorch's arithmetic): found on the first training forward's graph.
            self._functions_checked = True
            check_functions(list(_tensors(out)), supported())
        return out

    def _round_input(self, t):
        check_device([("", t)], "the model's input")
        if not t.is_floating_point():
            return t
        if self.base not in _WIDE:
            t = round_tensor(t, self.base)
        return _mark(t, self.base)

    def _output(self, t, fmt):
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            return t
        if fmt not in _WIDE:
            rounding = self.policy["rounding"]
            self.calls += 1
            t = quantize(t, fmt, rounding, seed=self.seed, stream=(self.step << 20) + 2 * self.calls,
                         backward_format=fmt)
        return _mark(t, fmt)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        if name in FUSED_GEMMS:
            refuse_fused(name, self.unclassified, supported())
        if name in KERNELS:
            op = KERNELS[name]
            inputs = list(_tensors(args))
            fmt = _promote(*[_format_of(t, self.base) for t in inputs[:2]]) if len(inputs) >= 2 else self.base
            weight = args[1] if len(args) > 1 else kwargs.get("weight")
            if name == "linear" and id(weight) in self.embedding_tables:
                op = "lm_head"  # an output projection tied to an embedding table (GPT's lm_head)
            self.counts["rpsim kernel"][name if op != "lm_head" else "linear (lm_head)"] += 1
            cfg = self.gemm_config(op, fmt)
            if name in ("linear", "conv2d", "conv1d") and id(weight) in self.param_layer:
                cfg = self._layer_config(cfg, op, name, self.param_layer[id(weight)], args)
            out = self._kernel(name, cfg, args, kwargs)
            if cfg.log is not None:
                out._rpsim_layer = self.param_layer[id(weight)]
                out._rpsim_flush_log = cfg.log
            return _mark(out, cfg.op.output_format(fmt))
        if name in _layers.LAYER_KERNELS:  # layer_norm, gelu: the C++ layers, where they express the call
            out = _layers.run(self, name, args, kwargs, _format_of(args[0], self.base))
            if out is not None:
                self.counts["rpsim kernel"][name] += 1
                weight = _layers._arg(args, kwargs, 2, "weight") if name == "layer_norm" else None
                if self.telemetry and id(weight) in self.param_layer:  # a GEMM's input-gradient flushes count here
                    out._rpsim_layer = self.param_layer[id(weight)]
                return _mark(out, self.op_format(name, [args[0]]))
        if name == "embedding":  # its weight gradient in the rule's output format before a tied sum
            args = _layers.embedding_args(self, args)
        out = func(*args, **kwargs)
        floats = [t for t in _tensors(out) if t.is_floating_point()]
        if not floats:
            return out
        inputs = [t for t in _tensors(args) if isinstance(t, torch.Tensor)] + list(_tensors(kwargs))
        if name in LAYOUT or name.rstrip("_") in LAYOUT:
            self.counts["layout"][name] += 1
            fmt = self.promoted(inputs)
            if self.telemetry and name in ("relu", "relu_") and isinstance(out, torch.Tensor) and inputs:
                out._rpsim_src = (inputs[0], ("relu", (out > 0).detach()))  # telemetry: _upstream_flush
            if self.telemetry and name == "max_pool2d" and isinstance(out, torch.Tensor) and inputs \
                    and inputs[0].dim() == 4:
                _, idx = func(*args, **{**kwargs, "return_indices": True})
                out._rpsim_src = (inputs[0], ("pool", (idx, inputs[0].shape)))
            return _map_tensors(lambda t: _mark(t, fmt), out)
        self.counts["binary32"][name] += 1
        fmt = self.op_format(name, inputs)
        if name.endswith("_") and not name.startswith("_") and isinstance(out, torch.Tensor) and fmt not in _WIDE:
            # In place (x.mul_(y)): the rounded value goes back into x, which the caller keeps.
            return _mark(out.copy_(self._output(out, fmt)), fmt)
        return _map_tensors(lambda t: self._output(t, fmt), out)

    def _layer_config(self, cfg, op, name, layer, args):
        """cfg for one layer's GEMM: its FP8 state (fp8 policies), and with telemetry its flush log."""
        fp8 = (self.rule(op) or {}).get("scaled_inputs")
        if not (fp8 or self.telemetry or name != "linear"):
            return cfg
        cfg = copy.copy(cfg)
        if name != "linear":  # conv: col2im rounds the input gradient to the input's format
            cfg.x_format = _format_of(args[0], self.base)
        if fp8:
            # The layer's own op: its FP8 scaling state and statistics persist across steps; a layer the
            # recipe keeps in high precision runs bf16 inputs without block scales (gemm_op.cpp).
            if layer not in self.layer_ops:
                self.layer_ops[layer] = self._op(op, layer in self.high_precision_layers)
            cfg.op = self.layer_ops[layer]
            # rpsim train's keys of this layer at this step (NVFP4's stochastic gradient rounding);
            # cfg.seed (the emulation's) keys the Hadamard signs, as the run's seed does.
            cfg.layer = (layer, self.step)
        if self.telemetry:
            cfg.log = self.flush_log[layer]
            count = self._upstream_flush(args[0])
            if name == "linear" and count is not None:
                x_shape = args[0].shape
                cfg.on_input_grad_flush = lambda mask: count(mask, x_shape)
            elif name == "conv2d" and count is not None:
                cfg.on_col2im_flush = count
        return cfg

    def _upstream_flush(self, x):
        """Where the flushes of this layer's input gradient count: the layer whose output reached x
        through ReLUs and max-pools, as that layer's activation_grad underflow. rpsim's
        Tensor::flushed passes a ReLU where its input is positive and a max-pool at each window's
        argmax. None where x came another way."""
        steps = []
        while hasattr(x, "_rpsim_src"):
            x, step = x._rpsim_src
            steps.append(step)
        layer = getattr(x, "_rpsim_layer", None)
        if layer is None:
            return None
        log, shape = self.flush_log[layer], x.shape

        def count(mask, mask_shape):
            mask = mask.reshape(mask_shape)
            for kind, data in steps:
                if kind == "relu":
                    mask = mask & data
                else:  # max-pool: each output's flag to its window's argmax
                    idx, in_shape = data
                    flat = torch.zeros(in_shape[0], in_shape[1], in_shape[2] * in_shape[3], dtype=torch.bool)
                    flat.scatter_(2, idx.flatten(2), mask.flatten(2))
                    mask = flat.reshape(in_shape)
            log["activation"] = log.get("activation", 0) + int(mask.reshape(shape).sum())
        return count

    def _kernel(self, name, cfg, args, kwargs):
        if name == "__matmul__":
            return _ops.matmul(*args, config=cfg)
        return getattr(_ops, name)(*args, **kwargs, config=cfg)  # linear, conv1d/2d, mm, bmm, ...

    # -- parameters ------------------------------------------------------------------------------
    def _storage(self):
        return self.policy["master_weights"] or self.policy["weights"]

    def _store_parameters(self, rounding="rne"):
        fmt = self._storage()
        with torch.no_grad():
            for i, p in enumerate(self.model.parameters()):
                if fmt not in _WIDE:
                    # The key of rpsim's optimizer: (seed, (step << 16) ^ parameter index), the draws in
                    # the CLI's element order (an embedding table's column by column, as Eigen holds it).
                    t = p.t() if id(p) in self.embedding_tables else p
                    r = round_tensor(t, fmt, rounding, seed=self.seed, stream=(self.step << 16) ^ i)
                    p.copy_(r if t is p else r.t())
                _mark(p, fmt)

    def _gradient_hook(self, p):
        fmt = self.policy["gradients"]
        log = self.flush_log[self.param_layer[id(p)]]

        def hook(grad):
            if fmt in _WIDE:
                return grad
            out = round_tensor(grad, fmt)
            if self.telemetry:
                log["weight"] = log.get("weight", 0) + int(((grad != 0) & (out == 0)).sum())
            return out
        return hook

    def optimizer(self, opt):
        """`opt` with its step() followed by the policy's weight store: parameters rounded to the
        weights' (or master weights') format with the policy's update_rounding."""
        step = opt.step
        if hasattr(opt, "state_format"):  # rpsim.torch.SGD: momentum stored in the policy's format
            opt.state_format = self.policy["optimizer_state"]
        if self.policy.get("kahan"):
            if not hasattr(opt, "kahan_format"):
                raise ValueError(f"policy {self.policy['name']}: Kahan-compensated updates need the "
                                 f"optimizer to carry the compensation: use rpsim.torch.SGD, not "
                                 f"{type(opt).__name__}")
            opt.kahan_format = self._storage()

        def emulated_step(*args, **kwargs):
            result = step(*args, **kwargs)
            self.step += 1
            self._store_parameters(self.policy["update_rounding"])
            return result
        opt.step = emulated_step
        return opt

    def remove(self):
        """Takes the emulation off the model."""
        self.model.forward = self._forward
        for h in self._hooks:
            h.remove()
        for p in self.model.parameters():
            p.__dict__.pop("_rpsim_grad_format", None)

    def summary(self):
        acc = f", accumulation {self.accumulation}" if self.accumulation else ""
        lines = [f"rpsim.torch: policy {self.policy['name']}{acc}"]
        for path, counter in self.counts.items():
            names = ", ".join(f"{k} x{v}" for k, v in sorted(counter.items())) or "none"
            lines.append(f"  {path}: {names}")
        lines.append("  module types without a row in rpsim's op table (their ops took the paths above): "
                     + (", ".join(self.unclassified) or "none"))
        return "\n".join(lines)


def emulate(model, policy="fp16-amp", accumulation=None, *, seed=0):
    """Put `model` under `policy` (a name of `rpsim train`'s policy table or a policy object as configs write
    it, e.g. {"name": "bf16-pure", "update_rounding": "sr"}); accumulation: a model for every GEMM in place of
    the policy's (e.g. "tc:h100:fp16:fp32"). Returns the Emulation (summary(), optimizer(opt), remove()).
    Unknown names raise ValueError."""
    check_emulate_args(model, policy, seed, policies())
    check_not_emulated(model)
    if accumulation is not None:  # a bad spec, or a block-scaled one the policy's recipe cannot feed
        _blockscale.check_accumulation(policy, accumulation)
    return Emulation(model, policy, accumulation, seed)
