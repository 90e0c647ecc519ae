#!/usr/bin/env python3
"""An emulated training step against the framework users run (issue #30): rpsim's `fp16-amp`
step, with the FP64 shadow and without it, as a ratio to the same model's step in plain PyTorch
fp32 on the CPU and to the native Eigen step built -march=native, all in one process, one thread
each, in process CPU time.

    PYTHONPATH=build/python /usr/bin/python3 experiments/bench/bench_train_torch.py [--steps 20]

Models: the MLP of bench_train (784-256-256-10, batch 128, SGD with momentum 0.9) and the small
GPT of gpt-fp16-amp.json (2 blocks, width 64, 4 heads, 32 tokens, batch 8, tied head, AdamW with
warmup and cosine decay, clipping at 1) on synthetic-text, as bench_train_gpt. rpsim runs through
rpsim.train (the `rpsim train` entry); its step is the marginal cost: a run of 2N steps minus a
run of N, over N, so the set-up every run pays once is not charged. PyTorch and the native step
time N steps on one fixed batch after a warm-up. Each figure is the minimum over --repeats (the
machine is shared; the minimum is the least disturbed). The -march=native step comes from
build/bench/libbench_native_steps.so (experiments/bench/native/); without it its columns say so.
PyTorch's BLAS is stated; on the reference BLAS the ratios are refused unless
--allow-reference-blas (bench_blas.py).
"""
import argparse
import ctypes
import math
import os
import time

import torch

import bench_blas
import rpsim

MLP_BATCH = 128
GPT = dict(layers=2, width=64, heads=4, context=32, batch=8)


def mlp_config():
    return {"name": "bench", "seed": 0, "model": {"type": "mlp", "hidden": [256, 256]},
            "data": {"name": "synthetic", "synthetic_test_size": 1},
            "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}, "batch_size": MLP_BATCH,
            "evaluate": False, "telemetry": {"histogram_steps": []}}


def gpt_config():
    return {"name": "bench", "seed": 0,
            "model": {"type": "gpt", "n_layer": GPT["layers"], "n_embd": GPT["width"], "n_head": GPT["heads"],
                      "block_size": GPT["context"]},
            "data": {"name": "synthetic-text", "test_limit": 32},
            "optimizer": {"type": "adamw", "lr": 0.002, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1,
                          "warmup_steps": 20, "decay_steps": 200, "min_lr": 0.0002},
            "batch_size": GPT["batch"], "max_grad_norm": 1.0, "evaluate": False,
            "telemetry": {"histogram_steps": []}}


def rpsim_seconds_per_step(config, policy, shadow, steps, repeats):
    """Marginal CPU seconds of one rpsim.train step (runs of N and 2N steps, minimum of each)."""
    config = dict(config, policy=policy, shadow=shadow)
    if config["data"]["name"] == "synthetic":
        config["data"] = dict(config["data"], synthetic_train_size=MLP_BATCH * 2 * steps)  # the same data
    best = {}
    for _ in range(repeats):
        for n in (steps, 2 * steps):
            t0 = time.process_time()
            rpsim.train(config, threads=1, steps=n, as_frame=False)
            best[n] = min(best.get(n, math.inf), time.process_time() - t0)
    return (best[2 * steps] - best[steps]) / steps


def seconds_per_step(step, steps, repeats):
    step()  # warm-up: first-touch allocations, caches
    best = math.inf
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(steps):
            step()
        best = min(best, (time.process_time() - t0) / steps)
    return best


def torch_mlp_step():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                              torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.rand(MLP_BATCH, 784), torch.arange(MLP_BATCH) % 10

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step, sum(p.numel() for p in net.parameters())


class Block(torch.nn.Module):
    """nanoGPT's block (rpsim's gpt.cpp): pre-norm causal attention and a 4x GELU (erf) MLP."""

    def __init__(self, n, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(n), torch.nn.LayerNorm(n)
        self.c_attn, self.c_proj = torch.nn.Linear(n, 3 * n), torch.nn.Linear(n, n)
        self.c_fc, self.mlp_proj = torch.nn.Linear(n, 4 * n), torch.nn.Linear(4 * n, n)

    def forward(self, x):
        b, t, n = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).view(b, t, 3, self.heads, n // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) * (n // self.heads) ** -0.5
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(b, t, n))
        return x + self.mlp_proj(torch.nn.functional.gelu(self.c_fc(self.ln_2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, vocabulary):
        super().__init__()
        n = GPT["width"]
        self.wte, self.wpe = torch.nn.Embedding(vocabulary, n), torch.nn.Embedding(GPT["context"], n)
        self.blocks = torch.nn.Sequential(*[Block(n, GPT["heads"]) for _ in range(GPT["layers"])])
        self.ln_f = torch.nn.LayerNorm(n)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        return self.ln_f(self.blocks(x)) @ self.wte.weight.t()  # the tied head


def gpt_vocabulary(parameters):
    """synthetic-text's vocabulary from rpsim's parameter count (tied head: V*n + T*n + blocks + ln_f)."""
    n, t = GPT["width"], GPT["context"]
    rest = parameters - t * n - GPT["layers"] * (12 * n * n + 13 * n) - 2 * n
    if rest <= 0 or rest % n:
        raise SystemExit(f"bench_train_torch: rpsim's GPT has {parameters} parameters, not this benchmark's layout")
    return rest // n


def torch_gpt_step(vocabulary):
    torch.manual_seed(0)
    net = Gpt(vocabulary)
    decay = [p for p in net.parameters() if p.dim() >= 2]  # matrices only, as nanoGPT
    others = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": others, "weight_decay": 0.0}],
                            lr=0.002, betas=(0.9, 0.99), eps=1e-8)
    idx = torch.randint(vocabulary, (GPT["batch"], GPT["context"]))
    target = torch.randint(vocabulary, (GPT["batch"], GPT["context"]))
    t = [0]

    def step():
        lr = 0.002 * (t[0] + 1) / 20 if t[0] < 20 else 0.0002 + 0.5 * (1 + math.cos(
            math.pi * min(1.0, (t[0] - 20) / 180))) * (0.002 - 0.0002)
        for g in opt.param_groups:
            g["lr"] = lr
        t[0] += 1
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(idx).view(-1, vocabulary), target.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss.item()
    return step, sum(p.numel() for p in net.parameters())


def load_native(path):
    if not os.path.exists(path):
        return None
    lib = ctypes.CDLL(path)
    lib.rpsim_bench_native_mlp_seconds.restype = ctypes.c_double
    lib.rpsim_bench_native_mlp_seconds.argtypes = [ctypes.c_int] * 3
    lib.rpsim_bench_native_gpt_seconds.restype = ctypes.c_double
    lib.rpsim_bench_native_gpt_seconds.argtypes = [ctypes.c_int] * 8
    lib.rpsim_bench_native_flags.restype = ctypes.c_char_p
    return lib


def main():
    here = os.path.dirname(os.path.abspath(rpsim.__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="N: rpsim runs N and 2N steps; the others time N")
    ap.add_argument("--repeats", type=int, default=3, help="the minimum over this many")
    ap.add_argument("--native-lib", default=os.path.join(here, "..", "..", "bench", "libbench_native_steps.so"))
    ap.add_argument("--only", choices=["mlp", "gpt"], help="one model")
    bench_blas.add_argument(ap)
    a = ap.parse_args()
    if a.steps < 1 or a.repeats < 1:
        ap.error("--steps and --repeats must be >= 1")
    torch.set_num_threads(1)
    blas = bench_blas.check(a.allow_reference_blas, torch=torch)
    native = load_native(a.native_lib)
    rows = []
    for model in ("mlp", "gpt"):
        if a.only and model != a.only:
            continue
        config = mlp_config() if model == "mlp" else gpt_config()
        parameters = rpsim.train(config, threads=1, steps=1, policy="fp32", as_frame=False).meta["parameters"]
        if model == "mlp":
            step, torch_parameters = torch_mlp_step()
            native_s = native and native.rpsim_bench_native_mlp_seconds(MLP_BATCH, a.steps, a.repeats)
            label = "MLP 784-256-256-10, batch 128"
        else:
            vocabulary = gpt_vocabulary(parameters)
            step, torch_parameters = torch_gpt_step(vocabulary)
            native_s = native and native.rpsim_bench_native_gpt_seconds(
                GPT["layers"], GPT["width"], GPT["heads"], GPT["context"], GPT["batch"], vocabulary, a.steps,
                a.repeats)
            label = "GPT small (n_embd 64, T 32, batch 8)"
        if torch_parameters != parameters:
            raise SystemExit(f"bench_train_torch: the PyTorch {model} has {torch_parameters} parameters, "
                             f"rpsim's {parameters}: not the same model")
        torch_s = seconds_per_step(step, a.steps, a.repeats)
        for shadow, aim in ((True, 3.0), (False, 1.5)):
            emulated = rpsim_seconds_per_step(config, "fp16-amp", shadow, a.steps, a.repeats)
            rows.append((f"{label} `fp16-amp` {'with the FP64 shadow' if shadow else 'without the shadow'}",
                         torch_s, emulated, native_s, aim))
    marked = " (REFERENCE BLAS)" if blas == "reference" else ""
    print(f"\n| training step (1 thread, CPU time, N={a.steps}) | PyTorch fp32 ms{marked} | rpsim ms | x PyTorch "
          f"| aim | native -march=native ms | x native |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, torch_s, emulated, native_s, aim in rows:
        nat = (f"{1e3 * native_s:.2f} | {emulated / native_s:.2f}x" if native_s else "NOT BUILT | -")
        print(f"| {label} | {1e3 * torch_s:.2f} | {1e3 * emulated:.2f} | {emulated / torch_s:.2f}x | "
              f"<= {aim:g}x | {nat} |")
    print(f"(PyTorch {torch.__version__}, {torch.get_num_threads()} thread; {bench_blas.describe(torch=torch)}; "
          "native: " + (native.rpsim_bench_native_flags().decode() if native else f"no {a.native_lib}") + ")")


if __name__ == "__main__":
    main()
