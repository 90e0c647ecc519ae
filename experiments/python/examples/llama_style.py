"""A small LLaMA-style decoder (Touvron et al. 2023): pre-norm blocks with RMSNorm, rotary position
embeddings on queries and keys, causal self-attention and a SwiGLU feed-forward (SiLU gate), no
biases -- the parts `rpsim train`'s layer list cannot express -- plus a character data set from
Debian's fortunes (/usr/share/games/fortunes, package `fortunes`).

Importable: `from llama_style import make_model, fortunes_batches`; plain PyTorch, no rpsim."""
import glob
import math
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019), over the last dimension."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(seq_len, head_dim, base=10000.0):
    """cos and sin of position * base^(-2i/head_dim), shape (seq_len, head_dim / 2) (Su et al. 2021)."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv)
    return torch.cos(angles).float(), torch.sin(angles).float()


def apply_rotary(x, cos, sin):
    """Rotates each (even, odd) pair of x's last dimension by its position's angle."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    t = x.shape[-2]
    c, s = cos[:t], sin[:t]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim, heads, max_seq):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        cos, sin = rotary_tables(max_seq, self.head_dim)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (w(x).view(b, t, self.heads, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q, k = apply_rotary(q, self.cos, self.sin), apply_rotary(k, self.cos, self.sin)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        p = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return self.wo(torch.matmul(p, v).transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    """w2(silu(w1 x) * w3 x) (Shazeer 2020)."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.w2(self.act(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, max_seq):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads, max_seq)
        self.ffn_norm = RMSNorm(dim)
        self.ffn = SwiGLU(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class LlamaStyle(nn.Module):
    """Token ids (batch, seq) -> next-token logits (batch, seq, vocab)."""

    def __init__(self, vocab=128, dim=64, layers=2, heads=4, hidden=172, max_seq=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden, max_seq) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.out = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.out(self.norm(x))


def make_model(vocab=128, dim=64, layers=2, heads=4, hidden=172, max_seq=64, seed=0):
    """The model with weights drawn from torch.manual_seed(seed) (the caller's RNG state is kept)."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return LlamaStyle(vocab, dim, layers, heads, hidden, max_seq)
    finally:
        torch.random.set_rng_state(state)


FORTUNES = "/usr/share/games/fortunes"


def fortunes_text(limit=400_000):
    """Debian's fortune cookies as ASCII text (the `fortunes` package), or None where it is not installed."""
    files = sorted(f for f in glob.glob(os.path.join(FORTUNES, "*"))
                   if os.path.isfile(f) and not f.endswith((".dat", ".u8")) and not os.path.islink(f))
    parts, size = [], 0
    for name in files:
        with open(name, "rb") as fh:
            text = fh.read().decode("ascii", errors="ignore")
        parts.append(text)
        size += len(text)
        if size >= limit:
            break
    return "".join(parts)[:limit] if parts else None


def fortunes_batches(batch=16, seq=64, steps=10, seed=0, vocab=128):
    """`steps` (inputs, targets) pairs of shape (batch, seq), characters as their ASCII codes (< vocab),
    cut at random offsets of the fortunes text. Without the package: random characters, with a
    message on stderr saying so."""
    text = fortunes_text()
    g = torch.Generator().manual_seed(seed)
    if text is None or len(text) < seq + 2:
        print(f"llama_style: {FORTUNES} not found (apt-get install fortunes): random characters instead",
              file=sys.stderr)
        data = torch.randint(32, 127, (100_000,), generator=g)
    else:
        data = torch.tensor([min(ord(c), vocab - 1) for c in text], dtype=torch.long)
    out = []
    for _ in range(steps):
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=g)
        x = torch.stack([data[s:s + seq] for s in starts])
        y = torch.stack([data[s + 1:s + seq + 1] for s in starts])
        out.append((x, y))
    return out


if __name__ == "__main__":
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step, (x, y) in enumerate(fortunes_batches(steps=30), 1):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
