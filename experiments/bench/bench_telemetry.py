#!/usr/bin/env python3
"""The cost of rpsim.torch.Telemetry in a CPU training loop, as a ratio to the same loop without
it, in one process (rounds interleaved, the median of each): a small GPT-style model (token
embedding, pre-norm attention blocks, MLP, tied-free head) trained with AdamW under
torch.autocast(bfloat16). The loop's matmuls run on PyTorch's BLAS: it is stated, and on the
reference BLAS (a slow baseline that makes the telemetry look cheap) the ratios are refused
unless --allow-reference-blas (bench_blas.py).

    PYTHONPATH=build/python python3 experiments/bench/bench_telemetry.py [--rounds 5 --steps 20]
"""
import argparse
import statistics
import time

import torch

import bench_blas
import rpsim.torch as rt


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) * (d // self.heads) ** -0.5
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, vocab=256, d=128, heads=4, layers=2, ctx=64):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(ctx, d)
        self.blocks = torch.nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.ln(self.blocks(x)))


def run(steps, telemetry):
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tel = rt.Telemetry(model, **telemetry) if telemetry is not None else None
    gen = torch.Generator().manual_seed(1)
    start = time.perf_counter()
    for _ in range(steps):
        idx = torch.randint(0, 256, (16, 64), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(idx[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), idx[:, 1:].reshape(-1))
        loss.backward()
        if tel:
            tel.step(loss)
        opt.step()
        opt.zero_grad()
    elapsed = time.perf_counter() - start
    if tel:
        tel.close()
    return elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    bench_blas.add_argument(ap)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    blas = bench_blas.check(args.allow_reference_blas, torch=torch)
    configs = {"without telemetry": None,
               "every=1 sample=4096": {"every": 1, "sample": 4096},
               "every=1 sample=1024": {"every": 1, "sample": 1024},
               "every=10 sample=4096": {"every": 10, "sample": 4096},
               "every=1 sample=None (all values)": {"every": 1, "sample": None}}
    times = {name: [] for name in configs}
    run(2, None)  # warm-up
    for _ in range(args.rounds):
        for name, kw in configs.items():
            times[name].append(run(args.steps, kw))
    base = statistics.median(times["without telemetry"])
    print(f"GPT-style model, {args.steps} steps x {args.rounds} rounds, {args.threads} thread(s), torch {torch.__version__}"
          + (", against the REFERENCE BLAS" if blas == "reference" else ""))
    for name, t in times.items():
        med = statistics.median(t)
        print(f"  {name:34s} {1000 * med / args.steps:8.2f} ms/step  {med / base:6.3f}x")


if __name__ == "__main__":
    main()
