"""Where a gradient tensor's values land when cast to a format at a loss scale, counted in
torch on the tensor's own device (the counts of `rpsim grads`, sim/scaling gradient_range.hpp):
  underflow  v != 0 and fl(v * scale) == 0
  subnormal  fl(v * scale) is a non-zero subnormal
  overflow   the rounding overflows (infinity, NaN, or beyond the largest finite value)
each a fraction of the non-zero finite values; zeros and non-finite values counted apart.

fl is round to nearest even, so each class is an interval of |v * scale| whose ends are
midpoints between format values; a tie goes to the even neighbour. The ends come from the
format's parameters as rpsim.format_info gives them, once per format.
"""
import math

import numpy as np
import torch

from .. import format_info, recipe_effect


class Thresholds:
    """|x| <= under: rounds to 0; under < |x| < normal: a subnormal; |x| >= over (> over when
    the largest finite value's significand is even, as e4m3's 1.110b): overflows."""

    def __init__(self, name):
        info = format_info(name)
        self.name = info["name"]
        tiny, normal, big = info["min_positive"], info["min_normal"], info["max_finite"]
        # A tie at tiny / 2 goes to 0 (even); at normal - tiny / 2 to normal (1.000b, even).
        self.under = tiny / 2 if info["subnormals"] else normal / 2
        self.normal = normal - tiny / 2 if info["subnormals"] else 0.0
        ulp = math.ldexp(1.0, math.frexp(big)[1] - 1 - info["man_bits"])
        self.over = big + ulp / 2
        self.tie_overflows = int(big / ulp) % 2 == 1  # odd significand: the tie rounds up, past the max


class UnknownFormatError(ValueError):
    """A formats= entry that is neither an rpsim format nor a block-scaled policy."""


def formats_and_recipes(names, who):
    """formats= split into Thresholds of the formats and the names of the block-scaled policies
    (those rpsim.recipe_effect takes), in the order given; anything else: UnknownFormatError."""
    fmts, recipes = [], []
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{who}: formats entries must be names (str), not {type(n).__name__}")
        try:
            fmts.append(Thresholds(n))
            continue
        except ValueError as e:
            as_format = str(e)
        try:
            recipe_effect(np.zeros(1, np.float32), n)
        except ValueError as e:
            raise UnknownFormatError(
                f"{who}: formats entry {n!r} is neither a format ({as_format}) nor a block-scaled policy "
                f"(mxfp8, mxfp6, mxfp4, nvfp4, fp8-blockwise ...: {e})") from None
        recipes.append(n)
    if not fmts and not recipes:
        raise ValueError(f"{who}: formats= names no format and no recipe")
    return fmts, recipes


def sample_flat(t, sample, generator):
    """t flattened (float64), or `sample` entries of it drawn uniformly with replacement."""
    flat = t.detach().reshape(-1)
    if sample is not None and flat.numel() > sample:
        idx = torch.randint(flat.numel(), (sample,), generator=generator, device="cpu").to(flat.device)
        flat = flat[idx]
    return flat.double()


class TensorStats:
    """Counts of one tensor over one recorded step (summed over the calls that produced it)."""

    def __init__(self, formats, recipes=()):
        self.entries = self.zeros = self.nonfinite = 0
        # per recipe: [non-zero finite entries, underflowed, saturated, subnormal] (counts)
        self.recipe = {r: [0, 0, 0, 0] for r in recipes}
        self.under = {f.name: 0 for f in formats}
        self.sub = {f.name: 0 for f in formats}
        self.over = {f.name: 0 for f in formats}
        self.amax = 0.0
        self.hist = {}
        self.dtype = ""

    def add(self, flat, formats, cast_scale, unscale, dtype):
        """Counts `flat` (a float64 tensor, moved to the host: a sample is small). NumPy's
        per-call cost is a fraction of torch's on small CPU arrays (measured: isfinite 2 us
        against 19 us on 4096 values), and the cost is per tensor, not per value."""
        self.dtype = str(dtype).replace("torch.", "")
        a = flat.detach().cpu().numpy()
        mag = np.abs(a)
        finite = np.isfinite(mag)
        vals = mag[finite & (mag > 0)]
        n, n_finite = vals.size, int(np.count_nonzero(finite))
        self.entries += a.size
        self.nonfinite += a.size - n_finite
        self.zeros += n_finite - n
        if not n:
            return
        # x = |v| * scale in binary64: exact for a power-of-two scale, else rounded once as a cast's input would be
        x = vals * cast_scale if cast_scale != 1.0 else vals
        # Three comparisons a format (measured: 12 of them cost half a sort of 4096 values).
        for f in formats:
            under = int(np.count_nonzero(x <= f.under))
            self.under[f.name] += under
            self.sub[f.name] += int(np.count_nonzero(x < f.normal)) - under if f.normal > f.under else 0
            self.over[f.name] += int(np.count_nonzero(x >= f.over if f.tie_overflows else x > f.over))
        u = vals * unscale if unscale != 1.0 else vals
        self.amax = max(self.amax, float(u.max()))
        e = np.frexp(u)[1] - 1  # floor(log2 |v|): |v| = m 2^e', m in [0.5, 1)
        lo = int(e.min())
        for i, c in enumerate(np.bincount(e - lo).tolist()):
            if c:
                self.hist[lo + i] = self.hist.get(lo + i, 0) + c

    def add_recipes(self, g, recipes, cast_scale):
        """What each block-scaled recipe's gradient quantiser does to the whole tensor g (times the
        cast's scale, in float32 as the quantisers read it), counted into self.recipe."""
        x = g.detach().reshape(-1).float()
        if cast_scale != 1.0:
            x = x * cast_scale
        x = x.cpu().numpy()
        for r in recipes:
            e = recipe_effect(x, r)
            c, nz = self.recipe[r], e["nonzero"]
            c[0] += nz
            c[1] += round(e["underflow"] * nz)
            c[2] += round(e["saturated"] * nz)
            c[3] += round(e["subnormal"] * nz)

    def recipe_fractions(self, r):
        nz, under, sat, sub = self.recipe[r]
        return [under / nz, sat / nz, sub / nz] if nz else [0.0, 0.0, 0.0]

    def fraction(self, counts, name):
        nz = self.entries - self.zeros - self.nonfinite
        return counts[name] / nz if nz else 0.0
