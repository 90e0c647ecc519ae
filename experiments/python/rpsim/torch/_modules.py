"""nn.Linear, nn.Conv1d and nn.Conv2d whose GEMMs (forward and both backward) run under an
accumulation model: drop-in modules, or from_module() to convert a trained one."""
from torch import nn

from . import _conv, _ops


class _Emulated:
    def _setup(self, accumulation, config):
        self.gemm = config if config is not None else _ops.GemmConfig(accumulation or _ops.DEFAULT_MODEL)

    @classmethod
    def from_module(cls, module, accumulation=None, *, config=None):
        """The same parameters (shared, not copied) under `accumulation`."""
        new = cls.__new__(cls)
        new.__dict__.update(module.__dict__)
        new._setup(accumulation, config)
        return new

    def _conv(self, op, x):
        """A convolution module's forward through `op` (im2col and one emulated GEMM)."""
        if self.padding_mode != "zeros":
            raise ValueError(f"{type(self).__name__}: padding_mode '{self.padding_mode}' is not emulated "
                             "(zeros only)")
        return op(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups, config=self.gemm)

    def extra_repr(self):
        return f"{super().extra_repr()}, accumulation={self.gemm.model}"


class Linear(_Emulated, nn.Linear):
    """nn.Linear(in_features, out_features, bias, accumulation="tc:h100:fp16:fp32")."""

    def __init__(self, in_features, out_features, bias=True, accumulation=None, *, config=None, **kw):
        nn.Linear.__init__(self, in_features, out_features, bias, **kw)
        self._setup(accumulation, config)

    def forward(self, x):
        return _ops.linear(x, self.weight, self.bias, config=self.gemm)


class Conv2d(_Emulated, nn.Conv2d):
    """nn.Conv2d(..., accumulation=...): im2col and one emulated GEMM (zero padding only)."""

    def __init__(self, *args, accumulation=None, config=None, **kw):
        nn.Conv2d.__init__(self, *args, **kw)
        self._setup(accumulation, config)

    def forward(self, x):
        return self._conv(_conv.conv2d, x)


class Conv1d(_Emulated, nn.Conv1d):
    """nn.Conv1d(..., accumulation=...)."""

    def __init__(self, *args, accumulation=None, config=None, **kw):
        nn.Conv1d.__init__(self, *args, **kw)
        self._setup(accumulation, config)

    def forward(self, x):
        return self._conv(_conv.conv1d, x)
