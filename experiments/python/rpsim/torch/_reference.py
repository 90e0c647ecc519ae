"""The pieces that put a `rpsim train` config's run into PyTorch: its initial weights and batches
(from the C++ trainer's own calls), the op table's losses as autograd functions on rpsim's loss
kernels, and SGD with the arithmetic of rpsim's optimizer (sim/train/src/optimizer.cpp)."""
import collections
import json
import os

import torch
from torch import nn

from .. import _core
from . import _gpt
from ._unsupported import no_double_backward


class _Loss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels, kernel, fmt, mark):
        ctx.kernel, ctx.dtype, ctx.mark = kernel, logits.dtype, mark
        return torch.tensor(kernel.forward(logits.detach().double().numpy(), fmt, labels.tolist()),
                            dtype=logits.dtype)

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("rpsim's loss kernel")
        # GradScaler.scale(loss) makes grad the loss scale (exact): rpsim seeds its backward with it.
        values, flushed = ctx.kernel.backward(float(grad))
        if ctx.mark is not None:  # the logits' layer's activation_grad underflow (Trainer, _flushes)
            ctx.mark.add_count(flushed)
        return torch.from_numpy(values).to(ctx.dtype), None, None, None, None


class RpsimLoss:
    """loss(logits, labels) on the op table's loss kernel `op` (cross_entropy, mse_loss) under
    `policy`: the CLI's arithmetic (its sums, exp and log in the policy's format). The logits'
    format is the one rpsim.torch.emulate marked on them, else their dtype's."""

    def __init__(self, op="cross_entropy", policy="fp32"):
        self.op, self.policy = op, policy
        self._kernel = _core._TorchLoss(op, policy)

    def __call__(self, logits, labels):
        if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() != 2:
            raise TypeError(f"RpsimLoss({self.op!r}): logits must be a 2-D floating tensor (rows, classes), not "
                            + (f"shape {tuple(logits.shape)} {logits.dtype}" if isinstance(logits, torch.Tensor)
                               else type(logits).__name__))
        if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.is_complex() \
                or labels.dim() != 1:
            what = f"shape {tuple(labels.shape)} {labels.dtype}" if isinstance(labels, torch.Tensor) \
                else type(labels).__name__
            raise TypeError(f"RpsimLoss({self.op!r}): labels ({what}) must be one class index per row (a 1-D "
                            f"integer tensor): rpsim's {self.op} kernel scores the logits against the labels' "
                            "classes (mse_loss: against their one-hot vectors), as `rpsim train`; for float "
                            "regression targets use torch.nn.functional.mse_loss (emulated on the binary32 path)")
        default = "binary64" if logits.dtype == torch.float64 else "binary32"
        fmt = getattr(logits, "_rpsim_format", default)
        mark = getattr(logits, "_rpsim_output", None)
        return _Loss.apply(logits, labels, _core._TorchLoss(self.op, self.policy), fmt, mark)


class SGD(torch.optim.Optimizer):
    """SGD (momentum, weight decay) on rpsim train's optimizer (the op core's update arithmetic,
    sim/train optimizer.cpp, through rpsim._core._Optimizer), in the parameters' dtype, one rounding
    per operation in rpsim's order: g + wd w; buf = momentum buf + g (buf = g the first step), stored
    in state_format; w - lr g. rpsim.torch.emulate's optimizer() sets state_format to the policy's
    optimizer_state (bf16-pure: bfloat16 momentum) and, under a Kahan policy (bf16-kahan),
    kahan_format to the weights' storage format: then w - lr g is a compensated update (Zamirai et
    al. 2020): the part of the update the store lost carried to the next step. Every param group
    shares one learning rate and one nonzero weight decay (a group's 0 leaves its parameters
    undecayed, nanoGPT's norms and biases), as rpsim train's optimizer has; the state lives in the
    C++ optimizer, not in state_dict()."""

    TYPE = "sgd"

    def __init__(self, params, lr=0.1, momentum=0.0, weight_decay=0.0, state_format=None):
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})
        self.state_format = state_format
        self.kahan_format = None
        self._core = None

    def _settings(self, params):
        """The groups' shared lr and nonzero weight decay; ValueError naming what differs."""
        lrs = {g["lr"] for g in self.param_groups}
        decays = {g["weight_decay"] for g in self.param_groups} - {0, 0.0}
        if len(lrs) > 1 or len(decays) > 1:
            raise ValueError(f"rpsim.torch.{type(self).__name__}: param groups with different learning rates "
                             f"({sorted(lrs)}) or weight decays ({sorted(decays)}); rpsim's optimizer has one of "
                             "each (a group's weight_decay 0 leaves it undecayed)")
        dtypes = {p.dtype for p in params}
        if not dtypes <= {torch.float32, torch.float64} or len(dtypes) > 1:
            raise ValueError(f"rpsim.torch.{type(self).__name__}: parameters of dtypes {sorted(map(str, dtypes))}; "
                             "rpsim's optimizer updates float32 or float64 parameters, all of one dtype")
        return lrs.pop(), (decays.pop() if decays else 0.0), dtypes.pop()

    def _make(self, wd, dtype):
        g = self.param_groups[0]
        return _core._Optimizer(self.TYPE, g["lr"], g.get("momentum", 0.0), wd, tuple(g.get("betas", (0.9, 0.999))),
                                g.get("eps", 1e-8), "binary64" if dtype == torch.float64 else "binary32",
                                self.state_format, self.kahan_format, self.kahan_format is not None)

    @torch.no_grad()
    def step(self, closure=None):
        params = [p for g in self.param_groups for p in g["params"]]
        decay = [bool(g["weight_decay"]) for g in self.param_groups for _ in g["params"]]
        lr, wd, dtype = self._settings(params)
        if self._core is None:
            self._core = self._make(wd, dtype)
        views = [p.detach() if p.is_contiguous() else p.detach().contiguous() for p in params]
        self._core.step([v.numpy() for v in views],
                        [None if p.grad is None else p.grad.detach().contiguous().numpy() for p in params], decay, lr)
        for p, v in zip(params, views):
            if v.data_ptr() != p.data_ptr():
                p.copy_(v)


class AdamW(SGD):
    """Adam with decoupled weight decay (torch.optim.AdamW) on rpsim train's optimizer, one
    rounding per operation in rpsim's order (optimizer.cpp's fused_loop), in the parameters' dtype:
    w' = w (1 - lr wd); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g (m, v stored in state_format);
    w' - (m / (sqrt(v) / sqrt(bc2) + eps)) (lr / bc1). A param group's weight_decay 0 leaves its
    parameters undecayed (nanoGPT's norms and biases). decoupled=False: Adam, the decay added to
    the gradient."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, state_format=None,
                 decoupled=True):
        torch.optim.Optimizer.__init__(self, params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                                      "weight_decay": weight_decay})
        self.state_format, self.kahan_format = state_format, None
        self.TYPE = "adamw" if decoupled else "adam"
        self._core = None


def lr_schedule(config, overrides=()):
    """A config's learning rate per step as `rpsim train` sets it (warmup and cosine decay,
    DeepSpeed's schedulers): a callable (step, applied) -> lr (applied: the steps not skipped)."""
    return _core._torch_lr_schedule(config, list(overrides))


def from_config(config, steps, overrides=(), *, with_test=False):
    """(model, batches, config dict) of a `rpsim train` config (a path or dict) whose model is an
    mlp or cnn (nn.Linear / nn.Conv2d layers holding the CLI's initial weights, its activations
    and pooling between) or a gpt (rpsim.torch._gpt.GPT, plain torch; batches of token ids and
    one target per token), and its first `steps` batches as (float64 inputs, int64 labels): the
    binary64 values the CLI's FP64 shadow reads (Trainer rounds them to binary32 for the emulated
    model, as the CLI rounds them to the policy's data format). Under a policy that stores binary64
    weights (fp64) every model type is a float64 model holding the CLI's binary64 initial weights.
    with_test: (model, batches, test batches, config), the test set in the CLI's evaluation batches
    (eval_batch_size). The batches are the CLI's whole steps: a config of micro-batches trains as
    rpsim train does under Trainer(gradient_accumulation_steps=k)."""
    raw = _core._torch_train_setup(config, list(overrides), steps)
    cfg = config
    if not isinstance(config, dict):
        with open(os.fspath(config)) as f:
            cfg = json.load(f)
    model_cfg = cfg.get("model", {})
    # A policy storing binary64 weights (fp64): a float64 model holding the CLI's binary64 values.
    dtype = torch.float64 if _core._torch_policy(cfg.get("policy", raw["policy"]))["weights"] == "binary64" \
        else torch.float32
    if model_cfg.get("type", "mlp") == "gpt":  # token ids in, one target per token
        model = _gpt.build(raw, dtype)
        batches = [(torch.from_numpy(x), torch.tensor(y, dtype=torch.long)) for x, y in raw["batches"]]
        test = [(torch.from_numpy(x), torch.tensor(y, dtype=torch.long)) for x, y in raw["test_batches"]]
        return (model, batches, test, cfg) if with_test else (model, batches, cfg)
    if model_cfg.get("type", "mlp") not in ("mlp", "cnn"):
        raise ValueError(f"model.type {model_cfg.get('type')!r}: from_config builds mlp, cnn and gpt models only")
    params, layers, channels = raw["parameters"], collections.OrderedDict(), raw["channels"]
    for name, op in raw["layers"]:
        layers[name] = _layer(op, name, params, channels, dtype)
        if op == "conv2d":
            channels = params[f"{name}.weight"].shape[1]
    model = nn.Sequential(_with_flatten(layers, model_cfg.get("type", "mlp")))
    batches, test = _tensors(raw["batches"], model_cfg, raw), _tensors(raw["test_batches"], model_cfg, raw)
    return (model, batches, test, cfg) if with_test else (model, batches, cfg)


def _tensors(pairs, model_cfg, raw):
    out = [(torch.from_numpy(x), torch.tensor(y, dtype=torch.long)) for x, y in pairs]
    if model_cfg.get("type") == "cnn" and out:
        c = raw["channels"]
        side = int(round((out[0][0].shape[1] // c) ** 0.5))  # square images (Fashion-MNIST: 28)
        out = [(x.reshape(x.shape[0], c, side, -1), y) for x, y in out]
    return out


def _with_flatten(layers, model_type):
    """cnn: an nn.Flatten (no arithmetic) in front of the first Linear."""
    if model_type != "cnn":
        return layers
    out = collections.OrderedDict()
    for name, module in layers.items():
        if isinstance(module, nn.Linear) and "flatten" not in out:
            out["flatten"] = nn.Flatten()
        out[name] = module
    return out


def _layer(op, name, params, channels, dtype):
    w = params.get(f"{name}.weight")
    if op == "linear":
        lin = nn.Linear(w.shape[0], w.shape[1], dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(params[f"{name}.bias"].reshape(-1)))
        return lin
    if op == "conv2d":
        # rpsim's layout: (C * k * k) x out, rows in (channel, ky, kx) order, as F.unfold's.
        k = int(round((w.shape[0] // channels) ** 0.5))
        conv = nn.Conv2d(channels, w.shape[1], k, padding=(k - 1) // 2, dtype=dtype)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(w.T.copy()).reshape(conv.weight.shape))
            conv.bias.copy_(torch.from_numpy(params[f"{name}.bias"].reshape(-1)))
        return conv
    if op == "layer_norm":
        norm = nn.LayerNorm(w.shape[1], dtype=dtype)
        with torch.no_grad():
            norm.weight.copy_(torch.from_numpy(w.reshape(-1)))
            norm.bias.copy_(torch.from_numpy(params[f"{name}.bias"].reshape(-1)))
        return norm
    modules = {"relu": nn.ReLU, "gelu": nn.GELU, "max_pool2d": lambda: nn.MaxPool2d(2)}
    if op not in modules:
        raise ValueError(f"layer {name}: op {op!r} is not built by from_config")
    return modules[op]()
