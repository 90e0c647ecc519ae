"""What emulate() leaves on a model, as pickling and copying see it. torch.save(model) pickles the
model's forward hooks and its forward (the Emulation, with the op core's C++ objects): refused by
name (rpsim.torch.UnsupportedError saying to save the state_dict), not with pickle's "Can't pickle
local object". copy.deepcopy (an EMA copy of the model) copies the emulation with the model."""
import copy

from ._unsupported import refuse_pickle


class Hook:
    """A hook emulate() puts on the model: called as the function it wraps, shared (not copied) by
    copy.deepcopy as a function is, and refused by name when pickled."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)

    def __reduce_ex__(self, protocol):
        refuse_pickle()

    def __deepcopy__(self, memo):
        return self


class NotPickled:
    """Refused by name when pickled; deep-copied attribute by attribute (as copy.deepcopy does it by
    default, which goes through __reduce_ex__)."""

    def __reduce_ex__(self, protocol):
        refuse_pickle()

    def __deepcopy__(self, memo):
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new
