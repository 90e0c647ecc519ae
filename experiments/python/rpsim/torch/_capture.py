"""rpsim.torch.capture_gemms: every matmul-class op of a PyTorch region written as A, B, C, D
(.npz, the arrays `rpsim gemm-check` reads) plus one manifest.json, so that
`rpsim gemm-check DIR` checks each against the kernel model its device and flags select.

The ops are seen below autograd and autocast (a TorchDispatchMode), so functional calls,
attention's bmm and the backward pass's GEMMs are recorded as the kernels received them:
torch.nn.Linear arrives as addmm (bias as C, beta = alpha = 1) or mm, torch.matmul of 3-D
tensors as bmm, autocast's casts already done.
"""
import json
import os
import tempfile

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import accumulation_spec
from ._run_files import write_atomic

# dtype -> how the .npz stores it: every value exactly (bf16 and FP8 widened to float32, as
# experiments/python/dump_gemm.py does); what rpsim's array reader takes.
_STORED = {torch.float16: np.float16, torch.bfloat16: np.float32, torch.float32: np.float32,
           torch.float64: np.float64}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        _STORED[getattr(torch, _name)] = np.float32


def _mm(args, kw):
    return None, args[0], args[1], 0.0, 1.0


def _addmm(args, kw):
    beta, alpha = kw.get("beta", args[3] if len(args) > 3 else 1), kw.get("alpha", args[4] if len(args) > 4 else 1)
    return args[0], args[1], args[2], beta, alpha


def _mv(args, kw):
    return None, args[0], args[1].unsqueeze(-1), 0.0, 1.0


def _addmv(args, kw):
    c, a, v, beta, alpha = _addmm(args, kw)
    return c.unsqueeze(-1), a, v.unsqueeze(-1), beta, alpha


def _dot(args, kw):
    return None, args[0].unsqueeze(0), args[1].unsqueeze(-1), 0.0, 1.0


def _scaled_arg(args, kw, name, position):
    """_scaled_mm's scale_a, scale_b, bias: keywords in some torch versions, positional in others."""
    return kw[name] if name in kw else args[position] if len(args) > position else None


def _scaled_mm(args, kw):
    bias = _scaled_arg(args, kw, "bias", 4)
    return bias, args[0], args[1], 1.0 if bias is not None else 0.0, 1.0


# The one table of matmul-class ops: aten name -> (C, A, B, beta, alpha) from the call's
# arguments; A is (batch x) M x K and B (batch x) K x N as the kernel multiplies them.
GEMM_OPS = {"mm": _mm, "bmm": _mm, "addmm": _addmm, "baddbmm": _addmm, "mv": _mv, "addmv": _addmv,
            "dot": _dot, "_scaled_mm": _scaled_mm}
# Ops whose GEMMs run inside a fused kernel that does not show them: listed as skipped, with
# the reason (one row a kind).
_CONV = "a convolution: the backend runs its GEMM internally (im2col / implicit GEMM), not exposed"
_ATTN = "fused attention (flash / memory-efficient / cuDNN): its two GEMMs and softmax are one kernel"
_EPILOGUE = "a GEMM with a fused epilogue whose output is not the GEMM's D"
HIDDEN_GEMM_OPS = {**{n: _CONV for n in ("convolution", "convolution_backward", "mkldnn_convolution",
                                          "_convolution", "cudnn_convolution", "_slow_conv2d_forward",
                                          "_slow_conv2d_backward")},
                   **{n: _ATTN for n in ("_scaled_dot_product_flash_attention",
                                         "_scaled_dot_product_flash_attention_backward",
                                         "_scaled_dot_product_efficient_attention",
                                         "_scaled_dot_product_efficient_attention_backward",
                                         "_scaled_dot_product_cudnn_attention",
                                         "_scaled_dot_product_cudnn_attention_backward",
                                         "_flash_attention_forward", "_flash_attention_backward",
                                         "_efficient_attention_forward", "_efficient_attention_backward")},
                   "_addmm_activation": _EPILOGUE, "addbmm": "addbmm sums its batch into one D: not one GEMM a file"}


def _numpy(x):
    if x.dtype not in _STORED:
        raise TypeError(f"dtype {x.dtype} is not one rpsim reads ({', '.join(str(d) for d in _STORED)})")
    x = x.detach()
    if _STORED[x.dtype] is np.float32 and x.dtype != torch.float32:
        x = x.float()  # exact: bf16 and FP8 values are binary32 values
    return np.ascontiguousarray(x.cpu().numpy())


def _transposed(x):
    """True when a matrix operand is stored column-major (B given as N x K, A as K x M)."""
    return x.dim() >= 2 and x.stride(-2) == 1 and x.stride(-1) != 1 and x.shape[-1] > 1


def _flags(device):
    f = {"allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
         "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
         "float32_matmul_precision": torch.get_float32_matmul_precision()}
    for name in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        try:
            f[name] = bool(getattr(torch.backends.cuda.matmul, name))
        except (AttributeError, AssertionError):  # torch 1.13 has no bf16 flag: said, not guessed
            f[name] = None
    return f


def _device_name(t):
    if t.device.type == "cuda":
        return torch.cuda.get_device_name(t.device)
    return t.device.type


def _write_atomic(path, write):
    """`write(f)` into a temporary file beside `path`, then renamed onto it: a full disk leaves
    neither a partial file nor the temporary (np.savez straight into the folder left a truncated
    g*.npz that the manifest did not list), and the OSError names `path`."""
    write_atomic(path, write, "capture_gemms")


def _on_cuda(args):
    return any(isinstance(a, torch.Tensor) and a.device.type == "cuda" for a in args)


def _launched(func, args, kwargs):
    """func(*args, **kwargs) run under the profiler: (its result, the CUDA kernels it launched as
    [{"name", "grid"}], or None and why not). The kernel name says the family (nvjet, cutlass, gemv ...)
    and the grid what no heuristic attribute does (a cutlass split-K kernel's grid.z)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = func(*args, **kwargs)
            torch.cuda.synchronize()
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f).get("traceEvents", [])
        finally:
            os.unlink(path)
        kernels = [{"name": e.get("name", ""), "grid": list(e.get("args", {}).get("grid", []))}
                   for e in events if e.get("cat") in ("kernel", "Kernel")]
        return out, kernels, None
    except Exception as e:  # the profiler is optional: the record says why it is missing
        return None, None, f"{type(e).__name__}: {e}"


class _Mode(TorchDispatchMode):
    def __init__(self, capture):
        super().__init__()
        self.capture = capture

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        kernels = why = None
        if name in GEMM_OPS and self.capture.record_schedule and _on_cuda(args):
            out, kernels, why = _launched(func, args, kwargs)
            if kernels is None:
                out = func(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        if name in GEMM_OPS or name in HIDDEN_GEMM_OPS:
            self.capture._record(name, args, kwargs, out, (kernels, why))
        return out


class capture_gemms:
    """Context manager: `with rpsim.torch.capture_gemms("step0"): loss = f(model(x)); loss.backward()`.

    directory: created if missing; a non-empty one raises FileExistsError unless overwrite=True
    (which removes only a previous capture's manifest.json and g*.npz, and still refuses other
    files). max_elements: a GEMM whose A, B, C and D hold more values is skipped (listed in the
    manifest with its shape). batch_sample: batched ops (bmm, baddbmm) keep this many batch
    elements, drawn with `seed`; the rest are counted as skipped. max_gemms: later GEMMs beyond
    this many files are skipped. model: an accumulation model spec recorded in the manifest for
    `rpsim gemm-check` (needed for CPU captures, where no cuBLAS preset applies).
    record_schedule (CUDA only): each GEMM's "cublas" entry holds how cuBLAS computed it: cuBLASLt's
    heuristic answer for the call (algorithm, tile, stages, SPLITK_NUM, REDUCTION_SCHEME; _cublaslt.py,
    ctypes) and the kernels it launched (names and grids, from the profiler), which `rpsim gemm-check`
    uses before any guess; a failed query is recorded with its reason.
    After the block, .manifest holds what was written (also in DIR/manifest.json)."""

    def __init__(self, directory, *, overwrite=False, max_elements=1 << 22, batch_sample=2, max_gemms=2000,
                 model=None, seed=0, record_schedule=True):
        for key, v in (("max_elements", max_elements), ("batch_sample", batch_sample), ("max_gemms", max_gemms)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"capture_gemms: {key}={v!r} must be a positive integer")
        if model is not None and not isinstance(model, str):
            raise TypeError(f"capture_gemms: model must be a model spec string, not {type(model).__name__}")
        if model is not None:  # checked here, not at `rpsim gemm-check` after the capture
            try:
                accumulation_spec(model)
            except ValueError as e:
                raise ValueError(f"capture_gemms: {e}") from None
        self.directory = os.fspath(directory)
        self.overwrite, self.max_elements, self.batch_sample = overwrite, max_elements, batch_sample
        self.max_gemms, self.model = max_gemms, model
        self.record_schedule = bool(record_schedule)
        self._cublaslt = None  # a _cublaslt.CublasLt, or the reason there is none, made at the first CUDA GEMM
        self._rng = np.random.default_rng(seed)
        self.manifest = None

    def _prepare_directory(self):
        os.makedirs(self.directory, exist_ok=True)
        present = sorted(os.listdir(self.directory))
        if not present:
            return
        if not self.overwrite:
            raise FileExistsError(f"capture_gemms: {self.directory} is not empty ({len(present)} entries, "
                                  f"first {present[0]}); pass overwrite=True to replace a previous capture")
        ours = [p for p in present if p == "manifest.json" or (p.startswith("g") and p.endswith(".npz"))]
        other = [p for p in present if p not in ours]
        if other:
            raise FileExistsError(f"capture_gemms: {self.directory} holds files that are not a capture's "
                                  f"({', '.join(other[:5])}); overwrite=True removes only manifest.json and g*.npz")
        for p in ours:
            os.remove(os.path.join(self.directory, p))

    def __enter__(self):
        self._prepare_directory()
        self._gemms, self._skipped, self._calls = [], [], 0
        self._mode = _Mode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        self.manifest = {"rpsim_gemm_capture": 1, "torch_version": torch.__version__, "model": self.model,
                         "flags": _flags(None), "calls": self._calls, "gemms": self._gemms,
                         "skipped": self._skipped,
                         "limits": {"max_elements": self.max_elements, "batch_sample": self.batch_sample,
                                    "max_gemms": self.max_gemms}}
        text = (json.dumps(self.manifest, indent=1) + "\n").encode()
        _write_atomic(os.path.join(self.directory, "manifest.json"), lambda f: f.write(text))
        return False

    def _skip(self, call, name, shape, reason, count=1):
        self._skipped.append({"call": call, "op": name, "shape": shape, "reason": reason, "gemms": count})

    def _heuristic(self, info, a, b, cm, d, scales):
        """cuBLASLt's answer for this call ({"error": why} when it cannot be asked)."""
        from . import _cublaslt
        if self._cublaslt is None:
            try:
                self._cublaslt = _cublaslt.CublasLt()
            except Exception as e:
                self._cublaslt = f"{type(e).__name__}: {e}"
        if isinstance(self._cublaslt, str):
            return {"error": self._cublaslt}
        flags = info["flags"]
        rpr = flags.get("allow_bf16_reduced_precision_reduction" if info["a_dtype"] == "bfloat16"
                        else "allow_fp16_reduced_precision_reduction")
        aligned = {"a": b, "b": a, "c": cm if cm is not None else d, "d": d}  # cuBLAS's A is torch's B
        try:
            q = _cublaslt.torch_query(
                info["m"], info["n"], info["k"], info["a_dtype"], info["b_dtype"], info["d_dtype"],
                a_transposed=info["transposed"]["a"], b_transposed=info["transposed"]["b"], batch=info["batch"],
                allow_tf32=flags["allow_tf32"], reduced_precision_reduction=rpr,
                fast_accum=info.get("use_fast_accum", False), c_dtype=info["c_dtype"],
                alignments={k: _cublaslt._alignment(t.data_ptr()) for k, t in aligned.items()},
                scale_pointers=[t.data_ptr() for t in scales if t is not None])
            return dict(self._cublaslt.heuristic(q), query={k: q[k] for k in ("m", "n", "k", "transa", "transb",
                                                                               "compute", "workspace")})
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}"}

    def _record(self, name, args, kwargs, out, launched=(None, None)):
        call, self._calls = self._calls, self._calls + 1
        if name in HIDDEN_GEMM_OPS:
            self._skip(call, name, [list(a.shape) for a in args if isinstance(a, torch.Tensor)],
                       HIDDEN_GEMM_OPS[name])
            return
        c, a, b, beta, alpha = GEMM_OPS[name](args, kwargs)
        d = out[0] if isinstance(out, (tuple, list)) else out
        batch = a.shape[0] if a.dim() == 3 else None
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        shape = [batch, m, n, k] if batch else [m, n, k]
        values = m * k + k * n + 2 * m * n
        if values > self.max_elements:
            self._skip(call, name, shape, f"{values} values > max_elements={self.max_elements}", batch or 1)
            return
        picks = [None]
        if batch:
            picks = sorted(self._rng.choice(batch, min(batch, self.batch_sample), replace=False).tolist())
            if len(picks) < batch:
                self._skip(call, name, shape, f"batch sampling: {len(picks)} of {batch} batch elements kept",
                           batch - len(picks))
        cm = None if c is None or float(beta) == 0 else c.expand(*d.shape)
        info = {"call": call, "op": name, "batch": batch, "m": m, "n": n, "k": k,
                "a_dtype": str(a.dtype).replace("torch.", ""), "b_dtype": str(b.dtype).replace("torch.", ""),
                "d_dtype": str(d.dtype).replace("torch.", ""),
                "c_dtype": None if cm is None else str(cm.dtype).replace("torch.", ""),
                "alpha": float(alpha), "beta": float(beta) if cm is not None else 0.0,
                "transposed": {"a": _transposed(a), "b": _transposed(b)},
                "phase": "forward" if torch.is_grad_enabled() else "backward or no_grad",
                "device": _device_name(d), "flags": _flags(d.device)}
        if name == "_scaled_mm":
            scales = {key: _scaled_arg(args, kwargs, key, i) for i, key in ((2, "scale_a"), (3, "scale_b"))}
            info["scales"] = {k: _numpy(v.float()).reshape(-1).tolist() for k, v in scales.items() if v is not None}
            # aten::_scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype,
            # use_fast_accum): under a dispatch mode the flag arrives positionally (index 7);
            # reading only the keywords recorded False for every call of the H200 captures.
            fast = _scaled_arg(args, kwargs, "use_fast_accum", 7)
            info["use_fast_accum"] = bool(fast) if fast is not None else False
        if self.record_schedule and d.device.type == "cuda":
            kernels, why = launched
            scales = [_scaled_arg(args, kwargs, key, i) for i, key in ((2, "scale_a"), (3, "scale_b"))] \
                if name == "_scaled_mm" else []
            info["cublas"] = {"heuristic": self._heuristic(info, a, b, cm, d, scales), "kernels": kernels}
            if why:
                info["cublas"]["kernels_error"] = why
        for i in picks:
            if len(self._gemms) >= self.max_gemms:
                self._skip(call, name, shape, f"max_gemms={self.max_gemms} reached")
                continue
            sel = (lambda t: t) if i is None else (lambda t, i=i: t[i])
            file = f"g{len(self._gemms):05d}_{name}" + ("" if i is None else f"_b{i}") + ".npz"
            arrays = {"A": _numpy(sel(a)), "B": _numpy(sel(b)), "D": _numpy(sel(d))}
            if cm is not None:
                arrays["C"] = _numpy(sel(cm))
            _write_atomic(os.path.join(self.directory, file), lambda f: np.savez(f, **arrays))
            self._gemms.append(dict(info, file=file, batch_index=i))
