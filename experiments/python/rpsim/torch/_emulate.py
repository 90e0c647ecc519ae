"""rpsim.torch.emulate: a user's nn.Module under one of `rpsim train`'s precision policies.

The policy rows and the op table's autocast classes come from the C++ tables (rpsim._core
._torch_policy / _torch_ops), the ones the CLI reads. The paths an op takes, listed by summary():
  rpsim kernel   linear, conv1d/2d/3d and their transposes, matmul/mm/bmm/addmm/baddbmm: rpsim's
                 GEMMs under the op's rule (compute, output, backward formats, accumulation model),
                 as `rpsim train`; layer_norm and gelu on the CLI's C++ layers (_layers);
  binary32       every other floating op: run by PyTorch in binary32 on the values of its inputs (cast
                 first to the low format on the lower-precision list), its output (and the gradient
                 arriving at it) rounded to its autocast class's format: the low format (lower-precision
                 list), binary32 (fp32 list), or its inputs' promoted format (neither), as autocast does;
  layout         views, copies and shape ops: no arithmetic, the format of the input kept;
  decomposed     nn.MultiheadAttention, nn.LSTM / GRU / RNN and their cells, einsum, tensordot, cdist:
                 run as the ops they are made of (_decompose), each on the paths above;
  complex        an op with a complex result (torch.fft.rfft2): PyTorch's complex64/128 arithmetic, not
                 rounded (rpsim's formats are real; a complex parameter or GEMM is refused);
  function backward  a custom autograd Function's backward, run under this mode (_functions).
What none can carry raises UnsupportedError naming it (_unsupported); an in-place op keeps its
rounding. A float16 or bfloat16 model runs where its dtype holds the policy's weights (model.half()
under fp16-pure): its parameters are the storage, PyTorch's ops run on float32 copies of its values.
"""
import collections
import contextlib
import copy
import types

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .. import _core
from . import _blockscale, _layers, _ops
from ._decompose import DECOMPOSED, run_decomposed
from ._flushes import VIEWS as _VIEWS, Flushes, LayerOutput, follow, upstream_flush
from ._hooks import Hook, NotPickled
from ._inplace import functional_in_place, in_place_rounded, round_result, rounded_output
from ._kernels import KERNEL_FUNCTIONS as _KERNEL_FUNCTIONS, LAYER_GEMMS as _LAYER_GEMMS, \
    ROW_FUNCTIONS as _ROW_FUNCTIONS
from ._marks import WIDE as _WIDE, format_of as _format_of, map_tensors as _map_tensors, mark as _mark, \
    name_of as _name, promote as _promote, run_widened, tensors as _tensors
from ._quantize import quantize, round_tensor
from ._shadow import Binary64Meets
from ._functions import tag_functions
from ._unsupported import FUSED_GEMMS, GemmWatch, check_device, check_dtypes, check_emulate_args, \
    check_kahan_optimizer, check_modules, check_not_checkpointed, check_not_emulated, refuse_fused
from ._tables import KERNELS, LAYOUT, MODULE_OPS, RESULT_SAVING, ROW_OPS, TORCH_FP32, TORCH_LOWER_PRECISION, \
    autocast_format, following, ops, policies  # noqa: F401


class Emulation(NotPickled, TorchFunctionMode):
    """What emulate() returns: the model's op-level emulation, active during its forward pass.
    summary() lists the ops per path and the module types the policy could not classify;
    optimizer(opt) wraps an optimizer so updated parameters are stored in the policy's format."""

    is_rpsim_emulation = True  # what check_not_emulated looks for

    def __init__(self, model, policy, accumulation, seed):
        super().__init__()
        self.model, self.seed, self.draws = model, seed, None  # draws: the shadow's (Binary64Meets)
        check_device(model.named_parameters(), "model parameter")  # the C++ kernels read host memory
        check_device(model.named_buffers(), "model buffer")
        check_modules(model)  # what no path carries, refused here rather than at the first step
        self._functions_checked, self._watch = False, GemmWatch()
        self.policy, self.policy_spec = _core._torch_policy(policy), policy  # (the C++ kernels parse the spec)
        check_dtypes(model, self.policy['name'], self._storage())
        self.high_precision_layers = _blockscale.high_precision_layers(model, self.policy)
        self.layer_ops = {}  # layer -> its _GemmOp (FP8 scaling state and statistics persist per layer)
        self.table = ops()
        self.autocast, self.autocast_whole = self.policy["autocast"]["format"], False
        self.base, self.accumulation = self.policy["data"], accumulation
        self.counts = {path: collections.Counter()
                       for path in ("rpsim kernel", "binary32", "layout", "decomposed", "complex", "function backward")}
        self.calls, self.step, self._configs = 0, 0, {}
        containers = (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.Identity)
        self.unclassified = sorted({type(m).__name__ for m in model.modules() if not list(m.children())
                                    and type(m) not in MODULE_OPS and not isinstance(m, containers)})
        # Per layer (the module owning a parameter; the root's own parameters under its type name, as
        # Trainer names the layer): FP8 state, and in telemetry the entries roundings flushed.
        self.param_layer = {id(p): name.rsplit(".", 1)[0] if "." in name else type(model).__name__
                            for name, p in model.named_parameters()}
        self.embedding_tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        self.flushes, self.telemetry = Flushes(), False  # counting flushes (a pass per gradient): Trainer's only
        # The mode is active inside the model's forward only, and left even when forward raises.
        self._forward = model.forward
        model.forward = self._emulated_forward
        self._hooks, self._hooked = [], set()
        self._store_parameters()
        self._hook_gradients()
        for p in model.parameters():
            p._rpsim_grad_format = self.policy["gradients"]  # GradScaler.unscale_ rounds to it
        for name, m in model.named_modules():  # a layer's output: what its module returns (_flushes)
            if any(True for _ in m.parameters(recurse=False)):
                self._hooks.append(m.register_forward_hook(self._claim(name or type(model).__name__)))

    def _claim(self, layer):
        def hook(module, inputs, output):
            if self.telemetry:
                self.flushes.claim(layer, output)
        return Hook(hook)

    # -- formats ---------------------------------------------------------------------------------
    def rule(self, op):
        r = self.policy["ops"].get(op, "follow")
        return None if r == "follow" else r

    def _op(self, op, high_precision=False, follow=False):
        """The op core's GEMM op of `op`'s rule (its accumulation replaced by emulate's), resolved once;
        follow: the rule made "follow", on its inputs' format (a GEMM inside an op autocast runs in fp32)."""
        spec = self.policy_spec if not follow else following(self.policy_spec, op)
        return _core._GemmOp.of_policy(spec, op, high_precision, self.accumulation)

    def gemm_config(self, op, input_format):
        follow = self.autocast_whole == "binary32"  # inside cdist under autocast: the GEMM in binary32
        key = (op, input_format, follow)
        if key not in self._configs:
            if self.accumulation is not None:  # as the config parser checks ops.OP.accumulation
                _blockscale.check_accumulation(self.policy_spec, self.accumulation, [op])
            g = self._op(op, follow=follow)
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
        if self.autocast_whole:  # inside an op autocast ran whole, which excludes it: no further cast
            return promoted
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
        if [p._version for p in self.model.parameters()] != self._stored:  # a checkpoint loaded, a clamp_:
            self._store_parameters()  # the weights in the policy's format again (nearest), as a GPU stores them
        # The input batch in the policy's data format (bf16-pure: bfloat16).
        args = _map_tensors(self._round_input, args)
        self._hook_gradients()  # (a parameter unfrozen since the last step gets its hook now)
        # (GemmWatch: a GEMM inside an op refused; binary64: float32 tensors made here meet float64 widened)
        with self, self._watch, (Binary64Meets(self.draws) if self.base == "binary64" else contextlib.nullcontext()):
            out = self._forward(*args, **kwargs)
        if torch.is_grad_enabled():  # a custom autograd Function's backward: under this mode too
            self._functions_checked = True
            tag_functions(self, list(_tensors(out)))
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

    def _autocast_inputs(self, args, kwargs, fmt):
        """The float tensors of args and kwargs in `fmt` as autocast casts an op's inputs (binary64 ones stay): its
        format (PReLU's weight gets its gradient in it), or binary32 for an fp32-list op run decomposed (an alias)."""
        cast = lambda t: t if not t.is_floating_point() or _format_of(t, self.base) in (fmt, "binary64") \
            else self._output(t.view_as(t) if fmt == "binary32" else t, fmt)  # noqa: E731
        return _map_tensors(cast, args), {k: _map_tensors(cast, v) for k, v in kwargs.items()}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        if not self._functions_checked and torch.is_grad_enabled():
            check_not_checkpointed()
        listed = None if self.autocast is None or self.autocast_whole else autocast_format(name, self.autocast)
        if listed:  # prelu, addr, einsum: autocast's cast of the inputs (cdist: to binary32)
            args, kwargs = self._autocast_inputs(args, kwargs, listed)
        if name in DECOMPOSED:  # an LSTM, nn.MultiheadAttention, cdist: their ops, each under this mode
            return run_decomposed(self, name, args, kwargs, listed)
        if name in FUSED_GEMMS:
            refuse_fused(name)
        if name in KERNELS:
            return self._gemm(name, args, kwargs)
        if name in _layers.LAYER_KERNELS:  # layer_norm, gelu: the C++ layers, where they express the call
            out = _layers.run(self, name, args, kwargs, _format_of(args[0], self.base))
            if out is not None:
                self.counts["rpsim kernel"][name] += 1
                weight = _layers._arg(args, kwargs, 2, "weight") if name == "layer_norm" else None
                if self.telemetry and id(weight) in self.param_layer:  # a GEMM's input-gradient flushes count here
                    out._rpsim_output = LayerOutput(out.shape)
                return _mark(out, self.op_format(name, [args[0]]))
        table = None
        if name == "embedding":  # its weight gradient in the rule's output format before a tied sum
            table = self._parameter_of(args[1]) if len(args) > 1 else None
            args = _layers.embedding_args(self, args)
        if name in RESULT_SAVING and (kept := in_place_rounded(self, name, args, kwargs)) is not None:
            return kept  # sigmoid_, exp_: out of place, rounded, copied back (_inplace)
        if kwargs.get("inplace") is True and (kept := functional_in_place(self, name, func, args, kwargs)) is not None:
            return kept  # F.silu(x, inplace=True): likewise
        out = self._watch.run(func, args, kwargs)
        if table is not None and self.telemetry and isinstance(out, torch.Tensor):
            out._rpsim_output = LayerOutput(out.shape)  # a layer's output: the rows its table gave
        floats = [t for t in _tensors(out) if t.is_floating_point()]
        if not floats:
            if any(t.is_complex() for t in _tensors(out)):  # fft, a complex product: PyTorch's, unrounded
                self.counts["complex"][name] += 1
            return out
        inputs = [t for t in _tensors(args) if isinstance(t, torch.Tensor)] + list(_tensors(kwargs))
        if (name in LAYOUT or name.rstrip("_") in LAYOUT) and not any(t.is_complex() for t in inputs):  # abs(z)
            return self._layout(name, func, args, kwargs, inputs, out)
        self.counts["binary32"][name] += 1
        return round_result(self, name, out, self.op_format(name, inputs))

    def _gemm(self, name, args, kwargs):
        op = KERNELS[name]
        inputs = list(_tensors(args))
        fmt = _promote(*[_format_of(t, self.base) for t in inputs[:2]]) if len(inputs) >= 2 else self.base
        weight = args[1] if len(args) > 1 else kwargs.get("weight")
        param = self._parameter_of(weight)
        if name == "linear" and param in self.embedding_tables:
            op = "lm_head"  # an output projection tied to an embedding table (GPT's lm_head)
        self.counts["rpsim kernel"][name if op != "lm_head" else "linear (lm_head)"] += 1
        cfg = self.gemm_config(op, fmt)
        mark = None
        if name in _LAYER_GEMMS and param in self.param_layer:
            cfg = self._layer_config(cfg, op, name, self.param_layer[param], args)
            if self.telemetry:
                mark = LayerOutput(())
                cfg.on_output_grad_flush = mark.add_mask
        out = self._kernel(name, cfg, args, kwargs)
        if mark is not None:
            mark.shape = tuple(out.shape)
            out._rpsim_output = mark
        return _mark(out, cfg.op.output_format(fmt))

    def _parameter_of(self, t):
        """id of the parameter t is, or is a view of (nn.MultiheadAttention's q, k, v rows); None."""
        if not isinstance(t, torch.Tensor):
            return None
        if id(t) in self.param_layer:
            return id(t)
        base = t._base
        return id(base) if base is not None and id(base) in self.param_layer else None

    def _layout(self, name, func, args, kwargs, inputs, out):
        self.counts["layout"][name] += 1
        fmt = self.promoted(inputs)
        row = ROW_OPS.get(name)
        if row is not None and self.rule(row) is not None and isinstance(out, torch.Tensor):
            # An op-table row whose rule does not follow its inputs (a fixed-point ReLU): its output and
            # gradient in the rule's format, as rpsim train's layer rounds them.
            fmt = self.op_format(row, inputs)
            out = rounded_output(self, out, fmt, name.endswith("_") or kwargs.get("inplace") is True)
        if self.telemetry and isinstance(out, torch.Tensor) and inputs:
            x = inputs[0]
            if name in ("relu", "relu_"):
                follow(x, out, ("relu", (out > 0).detach()))  # in place: out is x
            elif name == "max_pool2d" and x.dim() == 4:
                _, idx = run_widened(func, args, {**kwargs, "return_indices": True})
                follow(x, out, ("pool", (idx, x.shape)))
            elif name in _VIEWS and out.numel() == x.numel():
                view_of = getattr(x, "_rpsim_output", None) or getattr(x, "_rpsim_view_of", None)
                if view_of is not None:
                    out._rpsim_view_of = view_of
        return _map_tensors(lambda t: _mark(t, fmt), out)

    def _layer_config(self, cfg, op, name, layer, args):
        """cfg for one layer's GEMM: its FP8 state (fp8 policies), and with telemetry the callbacks
        that record the entries its roundings flush (_flushes)."""
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
            # rpsim train's keys of this layer and step (NVFP4's stochastic rounding); cfg.seed: Hadamard signs
            cfg.layer = (layer, self.step)
        if self.telemetry:
            cfg.on_param_grad_flush = self.flushes.param
            count = upstream_flush(args[0])
            if name == "linear" and count is not None:
                x_shape = args[0].shape
                cfg.on_input_grad_flush = lambda mask: count(mask, x_shape)
            elif name == "conv2d" and count is not None:
                cfg.on_col2im_flush = count
        return cfg

    def _kernel(self, name, cfg, args, kwargs):
        out = kwargs.pop("out", None)  # torch.mv(w, v, out=v): spectral_norm's power iteration (no grad)
        result = (_KERNEL_FUNCTIONS.get(name) or _ROW_FUNCTIONS[KERNELS[name]])(*args, **kwargs, config=cfg)
        return result if out is None else out.copy_(result)

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
        self._stored = [p._version for p in self.model.parameters()]  # (a write since moves one)

    def _hook_gradients(self):
        """Each trainable parameter's gradient rounded to the policy's gradient format (a frozen one has
        no gradient and takes no hook: PyTorch refuses one; it gets its hook once unfrozen)."""
        for p in self.model.parameters():
            if p.requires_grad and id(p) not in self._hooked:
                self._hooked.add(id(p))
                self._hooks.append(p.register_hook(self._gradient_hook(p)))

    def _gradient_hook(self, p):
        fmt = self.policy["gradients"]

        def hook(grad):
            if fmt in _WIDE:
                return grad
            out = round_tensor(grad, fmt)
            if self.telemetry:
                self.flushes.param(p, (grad != 0) & (out == 0))
            return out
        return hook

    def optimizer(self, opt):
        """`opt` with its step() followed by the policy's weight store: parameters rounded to the
        weights' (or master weights') format with the policy's update_rounding."""
        step = opt.step
        if hasattr(opt, "state_format"):  # rpsim.torch.SGD: momentum stored in the policy's format
            opt.state_format = self.policy["optimizer_state"]
        if self.policy.get("kahan"):
            check_kahan_optimizer(self.policy["name"], opt)
            opt.kahan_format = self._storage()

        def emulated_step(_opt, *args, **kwargs):
            result = step(*args, **kwargs)
            self.step += 1
            self._store_parameters(self.policy["update_rounding"])
            return result
        opt.step = types.MethodType(emulated_step, opt)  # bound: torch's LR schedulers read step.__self__
        return opt

    def remove(self):
        """Takes the emulation off the model."""
        self.model.forward = self._forward
        for h in self._hooks:
            h.remove()
        self._hooks, self._hooked = [], set()
        for p in self.model.parameters():
            p.__dict__.pop("_rpsim_grad_format", None)

    def summary(self):
        acc = f", accumulation {self.accumulation}" if self.accumulation else ""
        lines = [f"rpsim.torch: policy {self.policy['name']}{acc}"] + [
            f"  {path}: " + (", ".join(f"{k} x{v}" for k, v in sorted(c.items())) or "none")
            for path, c in self.counts.items()]
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
