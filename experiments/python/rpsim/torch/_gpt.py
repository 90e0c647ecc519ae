"""rpsim train's gpt row (sim/train/src/gpt.cpp, nanoGPT's model.py without dropout) as a plain torch
module: token and position embeddings, pre-LN blocks of causal self-attention and a GELU MLP, a final
LayerNorm and an output projection tied to the token embedding. Nothing in it calls rpsim: under
rpsim.torch.emulate its ops take the op table's kernels (Linear, LayerNorm, GELU, matmul, softmax; the
linear whose weight is an nn.Embedding's table is the lm_head row), so from_config's copy, holding the
CLI's initial weights, trains byte-identically to `rpsim train`.

steps.csv's layers are the CLI's top-level layers (wte, h<i>_attn, h<i>_mlp, ln_f: rpsim_layers), each
with the parameters of the modules inside it."""
import math

import torch
from torch import nn
import torch.nn.functional as F


class Embeddings(nn.Module):
    """wte: token + position embedding of each token, the positions' rows read per window."""

    def __init__(self, vocabulary, context, width):
        super().__init__()
        self.token = nn.Embedding(vocabulary, width)
        self.position = nn.Embedding(context, width)

    def forward(self, idx):
        b, t = idx.shape
        # One position id per token (not a broadcast add of wpe): embedding's backward then adds each
        # position's rows window by window in order, as the CLI's Embedding does (a broadcast's sum
        # over the batch is a reduction whose order PyTorch picks).
        pos = torch.arange(t, device=idx.device).expand(b, t)
        return self.token(idx) + self.position(pos)


class AttentionHalf(nn.Module):
    """x + c_proj(attention(c_attn(ln_1(x)))): nanoGPT's explicit attention path."""

    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.register_buffer("keep", torch.tril(torch.ones(context, context, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = att.masked_fill(~self.keep[:t, :t], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return x + self.c_proj(y)


class MlpHalf(nn.Module):
    """x + c_proj(gelu(c_fc(ln_2(x))))."""

    def __init__(self, width):
        super().__init__()
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.c_proj(self.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    """forward(idx) -> logits (batch, context, vocabulary); idx: token ids (any dtype: the CLI's
    batches hold them as floats)."""

    def __init__(self, vocabulary, n_layer, n_embd, n_head, block_size):
        super().__init__()
        self.wte = Embeddings(vocabulary, block_size, n_embd)
        self.rpsim_layers = ["wte"]
        for i in range(n_layer):
            setattr(self, f"h{i}_attn", AttentionHalf(n_embd, n_head, block_size))
            setattr(self, f"h{i}_mlp", MlpHalf(n_embd))
            self.rpsim_layers += [f"h{i}_attn", f"h{i}_mlp"]
        self.ln_f = nn.LayerNorm(n_embd)
        self.rpsim_layers.append("ln_f")
        self.n_layer = n_layer

    def forward(self, idx):
        x = self.wte(idx.long())
        for i in range(self.n_layer):
            x = getattr(self, f"h{i}_mlp")(getattr(self, f"h{i}_attn")(x))
        return F.linear(self.ln_f(x), self.wte.token.weight)  # the tied lm_head


def _cli_name(torch_name):
    """rpsim train's name of a parameter of GPT (h0_attn.c_attn.weight -> h0.attn.c_attn.weight)."""
    head, _, rest = torch_name.partition(".")
    if head.endswith("_attn"):
        block = head[:-len("_attn")]
        return f"{block}.{rest}" if rest.startswith("ln_") else f"{block}.attn.{rest}"
    if head.endswith("_mlp"):
        block = head[:-len("_mlp")]
        return f"{block}.{rest}" if rest.startswith("ln_") else f"{block}.mlp.{rest}"
    return torch_name


def build(raw, dtype=torch.float32):
    """The GPT of a `rpsim train` gpt config, holding the C++ trainer's initial parameters (raw:
    _core._torch_train_setup's result; a Linear's weight there is in x out, a norm's a row) in
    `dtype` (float64 under a policy storing binary64 weights: the CLI's binary64 values, unrounded)."""
    shape, params = raw["gpt"], raw["parameters"]
    vocabulary = params["wte.token.weight"].shape[0]
    model = GPT(vocabulary, shape["n_layer"], shape["n_embd"], shape["n_head"], shape["block_size"]).to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            value = torch.from_numpy(params[_cli_name(name)])
            if name.endswith(".weight") and p.dim() == 2 and not name.startswith("wte."):
                value = value.T  # nn.Linear holds out x in
            p.copy_(value.reshape(p.shape))
    return model
