"""rpsim.torch: a user's own PyTorch model under rpsim's emulated precision, and checks of a real
PyTorch training run, on the same C++ core as the `rpsim` command line.

Needs PyTorch (Debian 12: `apt-get install python3-torch`, 1.13.1, CPU; the set-up installs it).

  quantize(x, format, rounding, ...)      differentiable rounding (forward, and the gradient if asked)
  mm bmm matmul addmm baddbmm addmv      GEMMs (forward and both backward) under an accumulation
  addbmm linear conv1d conv2d;            model, the same bits as rpsim.gemm (addbmm: one GEMM per
  Linear Conv1d Conv2d                    batch into the running result, as ATen)
  GradScaler(policy, **params)            torch.cuda.amp.GradScaler's API over the C++ scaler table
  emulate(model, policy, accumulation)    `rpsim train`'s precision policies on any nn.Module
  backends()                              {"cpu": ..., "cuda": {"built": ..., "available": ...}}
  policies(), policy(spec), ops()         the C++ policy table's names, one policy's row, the op table
  UnsupportedError                        (a ValueError) what emulate cannot carry: a
                                          torch.conv_tbc, activation checkpointing, a GPU model,
                                          a double backward ... (nn.LSTM / GRU / RNN,
                                          nn.MultiheadAttention, einsum, tensordot ... run as the ops
                                          they are made of)
  Trainer(model, policy, optimizer, ...)  an FP64 shadow in lockstep and rpsim train's four files,
                                          written as the steps end (a Ctrl-C keeps them)
  UnknownFormatError                      (a ValueError) a Telemetry formats= entry that is neither a
                                          format nor a block-scaled policy (mxfp8, nvfp4, fp8-blockwise)
  OutputDirError                          (an OSError) an out= folder that cannot hold the files,
                                          raised when Trainer or Telemetry is made
  from_config, RpsimLoss, SGD, AdamW,     a config's run in PyTorch (mlp, cnn, and gpt as a plain torch
  lr_schedule                             GPT), byte-identical to rpsim train

    trainer = rpsim.torch.Trainer(model, "fp16-amp", lambda p: torch.optim.SGD(p, lr=0.05),
                                  scaler=rpsim.torch.GradScaler("deepspeed"), out="runs/mine")
    for x, y in batches:
        trainer.step(x, y)
    trainer.finish()   # steps.csv, histograms.csv, evaluations.csv, meta.json
"""
try:
    import torch as _torch  # noqa: F401  (absolute: the real PyTorch, not this package)
except ImportError as e:  # pragma: no cover - exercised by a test with torch hidden
    raise ImportError("rpsim.torch needs PyTorch: apt-get install python3-torch (Debian 12 ships 1.13.1, CPU) "
                      f"[{e}]") from e

from ._capture import capture_gemms  # noqa: E402
from ._telemetry import Telemetry, TelemetryError  # noqa: E402
from ._gradstats import UnknownFormatError  # noqa: E402
from ._quantize import quantize  # noqa: E402
from ._ops import GemmConfig, addbmm, addmm, addmv, baddbmm, bmm, linear, matmul, mm  # noqa: E402
from ._conv import conv1d, conv2d  # noqa: E402
from ._modules import Conv1d, Conv2d, Linear  # noqa: E402
from ._scaler import GradScaler  # noqa: E402
from ._emulate import Emulation, emulate, ops, policies  # noqa: E402
from ._tables import policy  # noqa: E402
from ._unsupported import UnsupportedError  # noqa: E402
from ._run_files import OutputDirError  # noqa: E402
from ._trainer import Trainer  # noqa: E402
from ._reference import SGD, AdamW, RpsimLoss, from_config, lr_schedule  # noqa: E402
from ._backends import backends  # noqa: E402

__all__ = ["capture_gemms", "Telemetry", "TelemetryError", "UnknownFormatError",
           "quantize", "GemmConfig", "mm", "bmm", "matmul", "addmm", "baddbmm", "addmv", "addbmm", "linear", "conv1d", "conv2d",
           "Linear", "Conv1d", "Conv2d", "GradScaler", "emulate", "Emulation", "ops", "policies", "policy",
           "Trainer", "SGD", "AdamW", "RpsimLoss", "from_config", "lr_schedule", "UnsupportedError",
           "OutputDirError", "backends"]
