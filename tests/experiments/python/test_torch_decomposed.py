"""nn.MultiheadAttention, nn.LSTM, nn.GRU, nn.RNN and their cells under rpsim.torch.emulate (issue #36:
they were refused): each runs as the GEMMs and elementwise ops it is made of, its gradients through
the same op rules. Each is checked against an explicit rewrite of the same module in plain torch ops
under the same policy (identical bits, forward and gradients), and against the unemulated module
(PyTorch's own fused kernel) under fp32 and fp64 (close)."""
import copy
import math

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional


# -- explicit rewrites: the modules' arithmetic written out with their own parameters -------------
def lstm_step(xp, h, c, w_hh, b_hh):
    i, f, g, o = (xp + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def gru_step(xp, h, w_hh, b_hh):
    i_r, i_z, i_n = xp.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (h - n) * z + n


class ExplicitRecurrent(nn.Module):
    """The module's layers and directions, one input GEMM per layer and direction, then per step."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        r = self.rnn
        kind = type(r).__name__
        x = x.transpose(0, 1) if r.batch_first else x
        for layer in range(r.num_layers):
            outs = []
            for d, suffix in enumerate(["", "_reverse"][:2 if r.bidirectional else 1]):
                w = {n: getattr(r, f"{n}_l{layer}{suffix}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
                xp = F.linear(x, w["weight_ih"], w["bias_ih"])
                h = torch.zeros(x.shape[1], r.hidden_size)
                c = torch.zeros(x.shape[1], r.hidden_size)
                ys = [None] * x.shape[0]
                for t in (reversed(range(x.shape[0])) if d else range(x.shape[0])):
                    if kind == "LSTM":
                        h, c = lstm_step(xp[t], h, c, w["weight_hh"], w["bias_hh"])
                    elif kind == "GRU":
                        h = gru_step(xp[t], h, w["weight_hh"], w["bias_hh"])
                    else:
                        h = torch.tanh(xp[t] + F.linear(h, w["weight_hh"], w["bias_hh"]))
                    ys[t] = h
                outs.append(torch.stack(ys))
            x = torch.cat(outs, -1) if len(outs) == 2 else outs[0]
        return x.transpose(0, 1) if r.batch_first else x


class ExplicitAttention(nn.Module):
    """nn.MultiheadAttention's self- or cross-attention: PyTorch's steps, the mask after the scores."""

    def __init__(self, mha):
        super().__init__()
        self.mha = mha

    def forward(self, q_in, kv_in, attn_mask=None, key_padding_mask=None):
        m = self.mha
        if m.batch_first:
            q_in, kv_in = q_in.transpose(0, 1), kv_in.transpose(0, 1)
        tgt, bsz, e = q_in.shape
        src, h = kv_in.shape[0], m.num_heads
        d = e // h
        if q_in is kv_in:
            q, k, v = F.linear(q_in, m.in_proj_weight, m.in_proj_bias).chunk(3, -1)
        else:
            ws, bs = m.in_proj_weight.chunk(3), m.in_proj_bias.chunk(3)
            q, k, v = (F.linear(t, w, b) for t, w, b in zip((q_in, kv_in, kv_in), ws, bs))
        q = q.contiguous().view(tgt, bsz * h, d).transpose(0, 1)
        k = k.contiguous().view(src, bsz * h, d).transpose(0, 1)
        v = v.contiguous().view(src, bsz * h, d).transpose(0, 1)
        s = (q / math.sqrt(d)) @ k.transpose(-2, -1)
        mask = None if attn_mask is None else attn_mask.unsqueeze(0)
        if key_padding_mask is not None:
            pad = key_padding_mask.view(bsz, 1, 1, src).expand(-1, h, -1, -1).reshape(bsz * h, 1, src)
            mask = pad if mask is None else mask | pad
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        y = (F.softmax(s, dim=-1) @ v).transpose(0, 1).contiguous().view(tgt * bsz, e)
        y = F.linear(y, m.out_proj.weight, m.out_proj.bias).view(tgt, bsz, e)
        return y.transpose(0, 1) if m.batch_first else y


# -- the comparisons ----------------------------------------------------------------------------
def grads(module):
    return [p.grad.clone() for p in module.parameters()]


def run(module, policy, inputs, emulate=True, **kw):
    if emulate:
        rt.emulate(module, policy)
    out = module(*inputs, **kw)
    y = out[0] if isinstance(out, tuple) else out
    (y * torch.linspace(-1, 1, y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
    return y.detach(), grads(module)


def same_bits(a, b):
    assert torch.equal(a[0], b[0])
    assert len(a[1]) == len(b[1]) and all(torch.equal(p, q) for p, q in zip(a[1], b[1]))


def close(a, b, tol):
    assert torch.allclose(a[0], b[0], rtol=tol, atol=tol)
    for p, q in zip(a[1], b[1]):
        assert torch.allclose(p, q, rtol=tol, atol=tol)


RECURRENT = [
    lambda: nn.LSTM(5, 6, batch_first=True),
    lambda: nn.LSTM(5, 6, num_layers=2, bidirectional=True),
    lambda: nn.GRU(5, 6, batch_first=True, bidirectional=True),
    lambda: nn.RNN(5, 6, num_layers=2),
]


@pytest.mark.parametrize("make", RECURRENT, ids=["lstm", "lstm_2_layers_bidirectional", "gru_bidirectional",
                                                 "rnn_2_layers"])
@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-pure"])
def test_recurrent_modules_are_their_explicit_rewrite(make, policy):
    torch.manual_seed(0)
    rnn = make()
    x = torch.randn(3, 4, 5)  # (batch, time) or (time, batch)
    a = run(rnn, policy, (x,))
    b = run(ExplicitRecurrent(copy.deepcopy(rnn)), policy, (x,))
    same_bits(a, b)


@pytest.mark.parametrize("make", RECURRENT, ids=["lstm", "lstm_2_layers_bidirectional", "gru_bidirectional",
                                                 "rnn_2_layers"])
def test_recurrent_modules_are_close_to_pytorch_under_fp32_and_fp64(make):
    torch.manual_seed(1)
    rnn = make()
    x = torch.randn(3, 4, 5)
    close(run(copy.deepcopy(rnn), "fp32", (x,)), run(copy.deepcopy(rnn), None, (x,), emulate=False), 1e-5)
    wide, xd = copy.deepcopy(rnn).double(), x.double()
    close(run(copy.deepcopy(wide), "fp64", (xd,)), run(copy.deepcopy(wide), None, (xd,), emulate=False), 1e-12)


def packed_run(rnn, x, lengths):
    """rnn on x (batch first) packed to `lengths`: its padded output, final h (and c), the input's gradient."""
    x = x.clone().requires_grad_()
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, state = rnn(packed)
    y, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    states = state if isinstance(state, tuple) else (state,)
    (y * torch.linspace(-1, 1, y.numel()).reshape(y.shape)).sum().backward()
    return y.detach(), [s.detach() for s in states], x.grad


@pytest.mark.parametrize("make", RECURRENT[1:], ids=["lstm_2_layers_bidirectional", "gru_bidirectional",
                                                     "rnn_2_layers"])
@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-amp"])
def test_a_packed_sequence_gives_each_sequence_its_own_bits(make, policy):
    # A packed sequence (pack_padded_sequence: variable lengths, NLP's usual batch) was refused. It runs
    # as PyTorch's packed layers do: each step on the sequences still running; in reverse a sequence
    # starts at its own last step. So each sequence gets the bits it gets alone, unpadded: output, final
    # state and its input's gradient.
    torch.manual_seed(2)
    rnn = make()
    rnn.batch_first = True
    lengths = [3, 5, 1, 4]
    x = torch.randn(4, 5, 5)
    rt.emulate(rnn, policy)
    y, states, dx = packed_run(rnn, x, lengths)
    for i, n in enumerate(lengths):
        xi = x[i:i + 1, :n].clone().requires_grad_()
        yi, si = rnn(xi)
        (yi * torch.linspace(-1, 1, y.numel()).reshape(y.shape)[i:i + 1, :n]).sum().backward()
        assert torch.equal(yi[0], y[i, :n]) and not y[i, n:].any()
        for s, alone in zip(states, si if isinstance(si, tuple) else (si,)):
            assert torch.equal(alone[:, 0], s[:, i])
        assert torch.equal(xi.grad[0], dx[i, :n])


@pytest.mark.parametrize("make", RECURRENT[1:], ids=["lstm_2_layers_bidirectional", "gru_bidirectional",
                                                     "rnn_2_layers"])
def test_a_packed_sequence_is_close_to_pytorch_under_fp32(make):
    torch.manual_seed(3)
    rnn = make()
    rnn.batch_first = True
    x, lengths = torch.randn(4, 5, 5), [3, 5, 1, 4]
    ref = packed_run(copy.deepcopy(rnn), x, lengths)
    emulated = copy.deepcopy(rnn)
    rt.emulate(emulated, "fp32")
    got = packed_run(emulated, x, lengths)
    assert torch.allclose(got[0], ref[0], atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got[1], ref[1]))
    assert torch.allclose(got[2], ref[2], atol=1e-6)


@pytest.mark.parametrize("cell, explicit", [
    (nn.LSTMCell(5, 6), lambda c, x, hx: lstm_step(F.linear(x, c.weight_ih, c.bias_ih), *hx, c.weight_hh, c.bias_hh)),
    (nn.GRUCell(5, 6), lambda c, x, h: gru_step(F.linear(x, c.weight_ih, c.bias_ih), h, c.weight_hh, c.bias_hh)),
    (nn.RNNCell(5, 6), lambda c, x, h: torch.tanh(F.linear(x, c.weight_ih, c.bias_ih)
                                                  + F.linear(h, c.weight_hh, c.bias_hh))),
], ids=["lstm_cell", "gru_cell", "rnn_cell"])
def test_cells_are_their_explicit_rewrite_and_close_to_pytorch(cell, explicit):
    torch.manual_seed(2)
    x = torch.randn(4, 5)
    hx = (torch.randn(4, 6), torch.randn(4, 6)) if isinstance(cell, nn.LSTMCell) else torch.randn(4, 6)

    class Explicit(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c = c

        def forward(self, x, hx):
            return explicit(self.c, x, hx)
    same_bits(run(copy.deepcopy(cell), "fp16-amp", (x, hx)), run(Explicit(copy.deepcopy(cell)), "fp16-amp", (x, hx)))
    close(run(copy.deepcopy(cell), "fp32", (x, hx)), run(copy.deepcopy(cell), None, (x, hx), emulate=False), 1e-5)


def causal(t):
    return torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-pure"])
def test_multihead_attention_is_its_explicit_rewrite(batch_first, policy):
    torch.manual_seed(3)
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    x = torch.randn(2, 5, 8) if batch_first else torch.randn(5, 2, 8)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    kw = dict(attn_mask=causal(5), key_padding_mask=pad)
    a = run(copy.deepcopy(mha), policy, (x, x, x), need_weights=False, **kw)
    b = run(ExplicitAttention(copy.deepcopy(mha)), policy, (x, x), **kw)
    same_bits(a, b)
    # cross-attention: queries from one sequence, keys and values from another
    y = torch.randn(2, 3, 8) if batch_first else torch.randn(3, 2, 8)
    same_bits(run(copy.deepcopy(mha), policy, (x, y, y)), run(ExplicitAttention(copy.deepcopy(mha)), policy, (x, y)))


def test_multihead_attention_is_close_to_pytorch_under_fp32_and_fp64():
    torch.manual_seed(4)
    mha = nn.MultiheadAttention(8, 4, batch_first=True)
    x = torch.randn(2, 5, 8)
    kw = dict(attn_mask=causal(5), need_weights=False)
    close(run(copy.deepcopy(mha), "fp32", (x, x, x), **kw), run(copy.deepcopy(mha), None, (x, x, x), False, **kw),
          1e-5)
    wide, xd = copy.deepcopy(mha).double(), x.double()
    close(run(copy.deepcopy(wide), "fp64", (xd, xd, xd), **kw),
          run(copy.deepcopy(wide), None, (xd, xd, xd), False, **kw), 1e-12)
    # the averaged attention weights, as the module returns them
    m = copy.deepcopy(mha)
    rt.emulate(m, "fp32")
    _, w = m(x, x, x, attn_mask=causal(5))
    _, w_ref = copy.deepcopy(mha)(x, x, x, attn_mask=causal(5))
    assert w.shape == w_ref.shape == (2, 5, 5) and torch.allclose(w, w_ref, atol=1e-6)


@pytest.mark.parametrize("options", [dict(add_bias_kv=True), dict(add_zero_attn=True),
                                     dict(add_bias_kv=True, add_zero_attn=True, kdim=6, vdim=5)],
                         ids=["bias_kv", "zero_attn", "both_kdim_vdim"])
@pytest.mark.parametrize("float_mask", [False, True])
def test_multihead_attention_options_are_close_to_pytorch_under_fp32_and_fp64(options, float_mask):
    # add_bias_kv and add_zero_attn were refused: each is one more key and value, and one more mask column.
    torch.manual_seed(6)
    mha = nn.MultiheadAttention(8, 2, **options)
    x, kv = torch.randn(5, 3, 8), torch.randn(4, 3, options.get("kdim", 8))
    v = kv[..., :options.get("vdim", 8)]
    mask = torch.triu(torch.ones(5, 4, dtype=torch.bool), diagonal=1)
    pad = torch.tensor([[False] * 4, [False] * 3 + [True], [False] * 4])

    def kw(dtype):
        return dict(attn_mask=torch.zeros(5, 4, dtype=dtype).masked_fill(mask, -1e4) if float_mask else mask,
                    key_padding_mask=pad, need_weights=False)
    for policy, dtype, tol in (("fp64", torch.float64, 1e-12), ("fp32", torch.float32, 1e-5)):
        m, args = copy.deepcopy(mha).to(dtype), tuple(t.to(dtype) for t in (x, kv, v))
        close(run(copy.deepcopy(m), policy, args, **kw(dtype)), run(copy.deepcopy(m), None, args, False, **kw(dtype)),
              tol)
    y = run(copy.deepcopy(mha), "fp16-amp", (x, kv, v), **kw(torch.float32))
    assert torch.isfinite(y[0]).all() and all(torch.isfinite(g).all() for g in y[1])