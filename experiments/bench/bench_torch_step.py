#!/usr/bin/env python3
"""An emulated rpsim.torch training step as a ratio to the same model's plain PyTorch fp32 step, in
one process, one thread, PyTorch on the BLAS users run (OpenBLAS; the script says which it found):
the targets of the op-core issue (#38).

    PYTHONPATH=build/python /usr/bin/python3 experiments/bench/bench_torch_step.py [--steps 5] [--only resnet]

Models (each with its own batch):
  resnet   ResNet-style CNN: 3x3 conv, BatchNorm, residual blocks, ReLU; 3x32x32, batch 8
  gpt      small GPT-style decoder: width 64, 4 heads, 2 blocks, 32 tokens, batch 8, tied head
  mlp      784-256-256-10 ReLU MLP, batch 128
  resnet18 torchvision's resnet18 (random weights, 10 classes), 3x64x64, batch 8
Each emulated step is rpsim.torch.Trainer(...).step(x, y) (SGD, the policy's default loss scaler),
with the FP64 shadow and without it; the plain step is forward, cross-entropy, backward and
torch.optim.SGD's step. Figures: CPU seconds per step (time.process_time), the minimum over
--repeats runs of --steps steps after a warm-up step; the plain step and both emulated ones take
turns within each repeat (a row's plain figure is measured with it); the machine is shared, the
minimum is the least disturbed. Ratios are rpsim / plain.
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import rpsim.torch as rt  # noqa: E402

# The residual block of the ResNet-style example (examples/resnet_style.py), not a copy of it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "examples"))
from resnet_style import BasicBlock as Block  # noqa: E402


def resnet():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                        Block(16, 16), Block(16, 32, 2), Block(32, 64, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(64, 10))
    return net, torch.rand(8, 3, 32, 32), torch.arange(8) % 10


class Gpt(nn.Module):
    def __init__(self, vocab=96, width=64, heads=4, layers=2, context=32):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(GptBlock(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


class GptBlock(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.c_proj(y)
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


def gpt():
    torch.manual_seed(0)
    idx = torch.randint(0, 96, (8, 32))
    return Gpt(), idx, torch.roll(idx, -1, 1)


def mlp():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return net, torch.rand(128, 784), torch.arange(128) % 10


def resnet18():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10), torch.rand(8, 3, 64, 64), torch.arange(8) % 10


MODELS = {"resnet": (resnet, ("fp16-amp",)), "gpt": (gpt, ("fp16-amp",)), "mlp": (mlp, ("fp16-amp",)),
          "resnet18": (resnet18, ("fp16-amp", "mxfp8", "nvfp4"))}


def loss_of(out, y):
    return F.cross_entropy(out.flatten(0, -2), y.flatten()) if out.dim() > 2 else F.cross_entropy(out, y)


def seconds(fns, steps, repeats):
    """CPU seconds per step of each of fns, interleaved: each repeat runs every fn's steps in turn, so
    a machine that slows down or speeds up meanwhile moves the plain step and the emulated ones alike
    (measured one after the other, a plain step read 11.1 and 15.0 ms in two runs of one session)."""
    for fn in fns:
        fn()
    best = [math.inf] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            for _ in range(steps):
                fn()
            best[i] = min(best[i], (time.process_time() - t0) / steps)
    return best


def plain_step(make):
    net, x, y = make()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        loss_of(net(x), y).backward()
        opt.step()
    return step


def emulated_step(make, policy, shadow):
    net, x, y = make()
    trainer = rt.Trainer(net, policy, lambda p: torch.optim.SGD(p, lr=0.01), loss=loss_of, shadow=shadow,
                         histogram_steps=())
    if "quiet" in rt.Trainer.__init__.__code__.co_varnames:
        trainer.quiet = True
    return lambda: trainer.step(x, y)


def blas():
    cfg = torch.__config__.show()
    found = [n for n in ("OpenBLAS", "openblas", "MKL", "BLAS_INFO=generic") if n in cfg]
    try:
        maps = open(f"/proc/{os.getpid()}/maps").read()
        libs = sorted({p.rsplit("/", 1)[-1] for p in maps.split() if "blas" in p.lower()})
    except OSError:
        libs = []
    return f"torch {torch.__version__}, {found or 'BLAS ?'}, loaded: {', '.join(libs) or 'none'}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=sorted(MODELS), action="append")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"one thread; {blas()}")
    print(f"{'model':10} {'policy':9} {'plain s':>9} {'rpsim s':>9} {'ratio':>7} {'no shadow s':>12} {'ratio':>7}")
    for name in args.only or MODELS:
        make, pols = MODELS[name]
        for pol in pols:
            base, with_shadow, without = seconds(
                [plain_step(make), emulated_step(make, pol, True), emulated_step(make, pol, False)], args.steps,
                args.repeats)
            print(f"{name:10} {pol:9} {base:9.4f} {with_shadow:9.4f} {with_shadow / base:7.1f} "
                  f"{without:12.4f} {without / base:7.1f}", flush=True)


if __name__ == "__main__":
    main()
