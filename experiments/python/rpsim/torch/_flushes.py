"""rpsim.torch.Trainer's underflow columns: the entries that roundings flushed to zero in one step
(nonzero before a rounding, zero after it), kept as masks, so that an entry flushed twice (a weight
read by several GEMMs, an RNN's weights at every time step; an activation read by several layers)
counts once and every fraction lies in [0, 1]:

  <layer>_weight_grad_underflow_fraction
      entries of the layer's trainable parameters' gradients that a rounding of that gradient flushed
      (a GEMM's or the bias epilogue's output rounding, the C++ layers' roundings, the rounding to the
      policy's gradient format, the unscale, the clip), over those parameters' entries;
  <layer>_activation_grad_underflow_fraction
      entries of the gradient arriving at the layer's output (the tensor its module returns) that the
      cast of that gradient for the layer's backward GEMMs, the loss kernel, or the input-gradient
      rounding of a layer reading the output (through ReLUs and max-pools, as rpsim's Tensor::flushed
      follows them) flushed, over the entries of that gradient (summed over the module's calls).

A GEMM whose output no module returns as its own (a tied output head F.linear(x, wte.weight), a
projection inside a module's forward) counts toward no layer's activation column: its output
gradient is not the gradient at that layer's output (issue #36: the tied head's B*T*V flushes were
divided by the embedding's B*T*d entries)."""
import collections

import torch

# Pure views: a module returning a view of a layer's output (nn.MultiheadAttention: its out_proj's,
# transposed) returns that layer output for the activation columns (Flushes.claim).
VIEWS = {"view", "reshape", "transpose", "permute", "t", "contiguous", "flatten", "unflatten", "squeeze",
         "unsqueeze", "view_as", "reshape_as", "movedim"}


class LayerOutput:
    """The mark on a tensor a layer's kernel produced (a GEMM, a C++ layer), gathering the flushes of
    the gradient arriving at it; `layer` is the module that returned it as its output (None: none)."""
    __slots__ = ("shape", "layer", "mask", "count")

    def __init__(self, shape):
        self.shape, self.layer, self.mask, self.count = tuple(shape), None, None, 0

    def add_mask(self, mask):
        mask = mask.reshape(self.shape)
        self.mask = mask if self.mask is None else self.mask | mask

    def add_count(self, n):
        """Flushes known only as a count (the loss kernel's): entries zero before any cast of the
        gradient sees them, so never in a mask."""
        self.count += int(n)

    def flushed(self):
        return self.count + (int(self.mask.sum()) if self.mask is not None else 0)


class Flushes:
    """One step's flushes: per parameter (masks in its shape, and counts from the C++ layers, which
    report counts) and per layer, the marks of the outputs its module returned."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.masks, self.counts, self.outputs = {}, {}, collections.defaultdict(list)
        self.micro = {}  # parameter -> flushes summed over a step's finished micro-batches

    def end_micro_batch(self, last):
        """Gradient accumulation: the micro-batch's flushes per parameter into the step's sums; the
        activation marks only the last micro-batch's are kept (rpsim train's columns are its)."""
        for key in set(self.masks) | set(self.counts):
            m = self.masks.get(key)
            self.micro[key] = self.micro.get(key, 0) + (int(m.sum()) if m is not None else 0) + self.counts.get(key, 0)
        self.masks, self.counts = {}, {}
        if not last:
            self.outputs = collections.defaultdict(list)

    def end_accumulation(self, k):
        """After k micro-batches: each parameter's count is their mean (rpsim train's integer division)."""
        self.counts = {key: total // k for key, total in self.micro.items()}
        self.micro = {}

    def param(self, p, mask):
        """mask (p's shape) of p's gradient entries a rounding flushed; p may be a view of a parameter
        (nn.MultiheadAttention's q, k, v rows of in_proj_weight): placed in the parameter's entries."""
        base = p._base if p._base is not None else p
        if base is not p:
            if not base.is_contiguous():
                return
            full = torch.zeros(base.shape, dtype=torch.bool)
            full.as_strided(p.shape, p.stride(), p.storage_offset() - base.storage_offset()).copy_(mask)
            mask = full
        mask = mask.reshape(base.shape)
        old = self.masks.get(id(base))
        self.masks[id(base)] = mask if old is None else old | mask

    def param_count(self, p, n):
        self.counts[id(p)] = self.counts.get(id(p), 0) + int(n)

    def weight_flushed(self, params):
        return sum(int(self.masks[id(p)].sum()) if id(p) in self.masks else 0 for p in params) + \
            sum(self.counts.get(id(p), 0) for p in params)

    def activation_flushed(self, layer):
        return sum(m.flushed() for m in self.outputs.get(layer, ()))

    def claim(self, layer, output):
        """A module named `layer` returned `output` (a tensor, or a tuple whose first item is one):
        the mark on it, or on the tensor it is a view of, counts for that layer from now on."""
        t = output[0] if isinstance(output, (tuple, list)) and output else output
        mark = getattr(t, "_rpsim_output", None) or getattr(t, "_rpsim_view_of", None)
        if mark is not None and mark.layer is None:
            mark.layer = layer
            self.outputs[layer].append(mark)


def upstream_flush(x):
    """Where the flushes of the input gradient of a layer reading x count: the mark of the tensor
    whose value reached x through ReLUs and max-pools (rpsim's Tensor::flushed passes a ReLU where
    its input is positive and a max-pool at each window's argmax). None where x came another way.
    Returns count(mask, mask_shape), which ORs the flushed entries into that mark."""
    origin, steps = _source(x)
    mark = getattr(origin, "_rpsim_output", None)
    if mark is None:
        return None

    def count(mask, mask_shape):
        mask = mask.reshape(mask_shape)
        for kind, data in reversed(steps):  # backward: the op nearest x first
            if kind == "relu":
                mask = mask & data
            else:  # max-pool: each output's flag to its window's argmax
                idx, in_shape = data
                flat = torch.zeros(in_shape[0], in_shape[1], in_shape[2] * in_shape[3], dtype=torch.bool)
                flat.scatter_(2, idx.flatten(2), mask.flatten(2))
                mask = flat.reshape(in_shape)
        mark.add_mask(mask)
    return count


def follow(x, out, step):
    """out = an op of x that passes flushes back as `step` does ("relu", its mask; "pool", its argmax
    and x's shape): out remembers x's origin and the ops in between. In place (F.relu(x,
    inplace=True): out is x) the step joins x's own list, never a loop back to x (issue #36: the
    Trainer hung on nn.ReLU(inplace=True))."""
    origin, steps = _source(x)
    try:  # (None: out itself, so that an in-place op leaves no reference cycle holding the tensor)
        out._rpsim_src = (None if origin is out else origin, steps + (step,))
    except (AttributeError, RuntimeError):
        pass


def _source(x):
    """(the tensor whose value reached x through ReLUs and max-pools, those ops in forward order)."""
    src = getattr(x, "_rpsim_src", None)
    if src is None:
        return x, ()
    return (x if src[0] is None else src[0]), src[1]
