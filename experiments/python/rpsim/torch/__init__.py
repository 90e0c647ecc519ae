"""rpsim.torch: a user's own PyTorch model under rpsim's emulated precision, and checks of a real
PyTorch training run, on the same C++ core as the `rpsim` command line.

Needs PyTorch (Debian 12: `apt-get install python3-torch`, 1.13.1, CPU; the set-up installs it).
"""
try:
    import torch as _torch  # noqa: F401  (absolute: the real PyTorch, not this package)
except ImportError as e:  # pragma: no cover - exercised by a test with torch hidden
    raise ImportError("rpsim.torch needs PyTorch: apt-get install python3-torch (Debian 12 ships 1.13.1, CPU) "
                      f"[{e}]") from e

from ._capture import capture_gemms  # noqa: E402
from ._telemetry import Telemetry, TelemetryError  # noqa: E402

__all__ = ["capture_gemms", "Telemetry", "TelemetryError"]
