"""nn.LSTM, nn.GRU, nn.RNN and their cells as the ops they are made of, for rpsim.torch.emulate:
PyTorch runs each as one fused kernel (torch._VF.lstm ...), out of reach of the emulation, so the
emulation runs these functions in their place, with the module's own parameters, under its mode:
every linear is an emulated GEMM (its rule's formats and accumulation model), every sigmoid, tanh,
add and product takes the binary32 path with its output and gradient rounded, and autograd gives
the gradients through the same rules.

Per layer and direction, as cuDNN and PyTorch's CPU kernels do: the input projection of every time
step in one GEMM, F.linear(x, w_ih, b_ih); then per step gates = that step's rows + F.linear(h, w_hh,
b_hh), and the cell's elementwise update in PyTorch's CPU order (aten/src/ATen/native/RNN.cpp):
  LSTM  i, f, g, o = gates.chunk(4); c = sigmoid(f) * c + sigmoid(i) * tanh(g); h = sigmoid(o) * tanh(c)
        (with proj_size: h = F.linear(h, w_hr))
  GRU   r, z, n from the input and hidden projections' thirds: r = sigmoid(i_r + h_r), z = sigmoid(i_z +
        h_z), n = tanh(i_n + r * h_n); h = (h - n) * z + n
  RNN   h = tanh(i + h_proj) (or relu)
A bidirectional layer's reverse direction reads the steps last to first; its outputs follow the
forward direction's along the features. Between layers, dropout in training. A packed sequence
(torch.nn.utils.rnn.pack_padded_sequence) runs as PyTorch's packed layers run it: each step on the
sequences still running (_packed_direction)."""
import torch
import torch.nn.functional as F


def _lstm_step(xp, h, c, w_hh, b_hh, w_hr=None):
    gates = xp + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr)), c


def _gru_step(xp, h, w_hh, b_hh):
    i_r, i_z, i_n = xp.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (h - n) * z + n


def _rnn_step(nonlinearity):
    def step(xp, h, w_hh, b_hh):
        return nonlinearity(xp + F.linear(h, w_hh, b_hh))
    return step


def _direction(kind, x, state, weights, has_biases, reverse):
    """One layer, one direction over x (T, N, features): (outputs (T, N, H), final state)."""
    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
    w_hr = weights[4 if has_biases else 2] if len(weights) > (4 if has_biases else 2) else None
    xp = F.linear(x, w_ih, b_ih)  # every time step's input projection in one GEMM
    outputs = [None] * x.shape[0]
    for t in (reversed(range(x.shape[0])) if reverse else range(x.shape[0])):
        if kind == "lstm":
            h, c = _lstm_step(xp[t], state[0], state[1], w_hh, b_hh, w_hr)
            state = (h, c)
        else:
            h = _STEPS[kind](xp[t], state, w_hh, b_hh)
            state = h
        outputs[t] = h
    return torch.stack(outputs), state


def _rows(state, n):
    """The first n rows of a state (h, or lstm's (h, c))."""
    return tuple(z[:n] for z in state) if isinstance(state, tuple) else state[:n]


def _joined(parts):
    """States of row blocks stacked in order."""
    if isinstance(parts[0], tuple):
        return tuple(torch.cat(z) for z in zip(*parts))
    return torch.cat(parts)


def _packed_direction(kind, data, sizes, state, weights, has_biases, reverse):
    """One layer, one direction over a packed sequence (data: the steps' rows one after the other,
    sizes[t] of them at step t, the sequences sorted longest first) as PyTorch's PackedLayer and
    ReversedPackedLayer run it (aten/src/ATen/native/RNN.cpp): forward, a sequence that has ended
    leaves the batch with its final state; in reverse, a sequence joins when its last step comes,
    from its initial state. (outputs in data's layout, final state in the sorted order)."""
    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
    w_hr = weights[4 if has_biases else 2] if len(weights) > (4 if has_biases else 2) else None
    xp = F.linear(data, w_ih, b_ih).split(sizes)  # every step's input projection in one GEMM
    outputs, ended = [None] * len(sizes), []
    h = state if not reverse else _rows(state, sizes[-1])
    for t in (reversed(range(len(sizes))) if reverse else range(len(sizes))):
        have = (h[0] if kind == "lstm" else h).shape[0]
        if sizes[t] < have:  # forward: the sequences past their end keep their final state
            ended.append(tuple(z[sizes[t]:] for z in h) if kind == "lstm" else h[sizes[t]:])
            h = _rows(h, sizes[t])
        elif sizes[t] > have:  # reverse: the sequences whose last step this is start
            h = _joined([h, tuple(z[have:sizes[t]] for z in state) if kind == "lstm" else state[have:sizes[t]]])
        if kind == "lstm":
            h = _lstm_step(xp[t], h[0], h[1], w_hh, b_hh, w_hr)
            outputs[t] = h[0]
        else:
            h = _STEPS[kind](xp[t], h, w_hh, b_hh)
            outputs[t] = h
    return torch.cat(outputs), _joined([h] + ended[::-1])


def _layers(kind, x, hx, params, has_biases, num_layers, dropout, train, bidirectional, one_direction):
    """The stacked layers and directions: (output, finals, cells)."""
    directions = 2 if bidirectional else 1
    per = len(params) // (num_layers * directions)
    finals, cells = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(directions):
            k = layer * directions + d
            state = (hx[0][k], hx[1][k]) if kind == "lstm" else hx[k]
            out, state = one_direction(x, state, params[k * per:(k + 1) * per], d == 1)
            outs.append(out)
            finals.append(state[0] if kind == "lstm" else state)
            if kind == "lstm":
                cells.append(state[1])
        x = torch.cat(outs, -1) if directions == 2 else outs[0]
        if dropout and train and layer < num_layers - 1:
            x = F.dropout(x, dropout, training=True)
    return x, finals, cells


def _recurrent(kind):
    """torch._VF.<kind>(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first), or on a packed sequence (data, batch_sizes, hx, params, has_biases, num_layers,
    dropout, train, bidirectional): (output, h_n) or, for lstm, (output, h_n, c_n)."""
    def run(x, *args):
        if isinstance(args[0], torch.Tensor) and not args[0].is_floating_point():  # batch_sizes: packed
            sizes = args[0].tolist()
            out, finals, cells = _layers(kind, x, *args[1:], lambda z, state, w, rev: _packed_direction(
                kind, z, sizes, state, w, args[3], rev))
        else:
            hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = args
            x = x.transpose(0, 1) if batch_first else x
            out, finals, cells = _layers(kind, x, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                         lambda z, state, w, rev: _direction(kind, z, state, w, has_biases, rev))
            out = out.transpose(0, 1) if batch_first else out
        if kind == "lstm":
            return out, torch.stack(finals), torch.stack(cells)
        return out, torch.stack(finals)
    return run


def _cell(kind):
    """torch._VF.<kind>_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None): h, or (h, c) for lstm."""
    def run(x, hx, w_ih, w_hh, b_ih=None, b_hh=None):
        xp = F.linear(x, w_ih, b_ih)
        if kind == "lstm":
            return _lstm_step(xp, hx[0], hx[1], w_hh, b_hh)
        return _STEPS[kind](xp, hx, w_hh, b_hh)
    return run


_STEPS = {"gru": _gru_step, "rnn_tanh": _rnn_step(torch.tanh), "rnn_relu": _rnn_step(torch.relu)}

# torch function name -> the function run in its place
RECURRENT = {**{kind: _recurrent(kind) for kind in ("lstm", "gru", "rnn_tanh", "rnn_relu")},
             **{f"{kind}_cell": _cell(kind) for kind in ("lstm", "gru", "rnn_tanh", "rnn_relu")}}
