"""cuBLASLt's own answer for a GEMM, asked through ctypes (the standard library; no build dependency):
the algorithm cublasLtMatmulAlgoGetHeuristic ranks first for a call's shape, dtypes, layout and flags,
and that algorithm's configuration (CUBLASLT_ALGO_CONFIG_ID, TILE_ID, STAGES_ID, SPLITK_NUM,
REDUCTION_SCHEME, ...). capture_gemms records it per GEMM; sim/accumulation/fit/cublas_heuristic_table.py
asks it for a grid of shapes. Nothing here runs a GEMM.

The facts behind it (bitequiv, facebookexperimental/triton bitequiv/cublas_equiv_gemm.py; code ours):
the top algorithm's SPLITK_NUM is the split count cuBLAS runs, REDUCTION_SCHEME its merge. The enum
values are cublasLt.h's (CUDA 12 / 13).

PyTorch calls cuBLAS column-major with the operands swapped: torch's C[M, N] = A[M, K] @ B[K, N]
(row-major) is cuBLAS's C^T[N, M] = op(B^T) op(A^T), m = N, n = M, k = K; a torch operand stored
column-major (capture_gemms' "transposed") is a transposed cuBLAS operand. torch_query() builds that call.
"""
import ctypes
import glob
import os

# cudaDataType_t, and its element size in bytes
CUDA_R = {"float16": 2, "float32": 0, "float64": 1, "bfloat16": 14, "float8_e4m3fn": 28, "float8_e5m2": 29}
ELEMENT_BYTES = {2: 2, 0: 4, 1: 8, 14: 2, 28: 1, 29: 1}
# cublasComputeType_t
COMPUTE_32F, COMPUTE_32F_FAST_TF32, COMPUTE_64F = 68, 77, 70
OP_N, OP_T = 0, 1
# cublasLtMatmulDescAttributes_t
DESC_TRANSA, DESC_TRANSB, DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER, DESC_FAST_ACCUM = 3, 4, 17, 18, 25
# cublasLtMatrixLayoutAttribute_t
LAYOUT_BATCH_COUNT, LAYOUT_STRIDED_BATCH_OFFSET = 5, 6
# cublasLtMatmulPreferenceAttributes_t
PREF_MAX_WORKSPACE_BYTES, PREF_REDUCTION_SCHEME_MASK = 1, 3
PREF_MIN_ALIGNMENT = {"a": 5, "b": 6, "c": 7, "d": 8}
# cublasLtReductionScheme_t
REDUCTION_NONE, REDUCTION_INPLACE, REDUCTION_COMPUTE_TYPE, REDUCTION_OUTPUT_TYPE, REDUCTION_MASK = 0, 1, 2, 4, 7
# cublasLtMatmulAlgoConfigAttributes_t: what a record keeps, and the C type each is read as
CONFIG = {"algo_id": (0, ctypes.c_int32), "tile_id": (1, ctypes.c_uint32), "splitk_num": (2, ctypes.c_uint32),
          "reduction_scheme": (3, ctypes.c_uint32), "cta_swizzling": (4, ctypes.c_uint32),
          "custom_option": (5, ctypes.c_uint32), "stages_id": (6, ctypes.c_uint32),
          "inner_shape_id": (7, ctypes.c_uint16), "cluster_shape_id": (8, ctypes.c_uint16)}
# PyTorch's cuBLAS workspace on Hopper (CUBLAS_WORKSPACE_CONFIG default :4096:8, 32 MiB); override with
# RPSIM_CUBLASLT_WORKSPACE (bytes) to match another setting.
DEFAULT_WORKSPACE = 32 << 20


class HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t: the opaque 64-byte algorithm, then its workspace, state, waves."""
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


class CublasLtError(RuntimeError):
    """A cuBLASLt call failed or the library is absent; the message names the call and its status."""


def _alignment(ptr):
    """The largest power of two (up to 256) dividing a device address: cuBLASLt's MIN_ALIGNMENT_*."""
    a = 256
    while a > 1 and ptr % a:
        a //= 2
    return a


def torch_query(M, N, K, a_dtype, b_dtype, d_dtype, *, a_transposed=False, b_transposed=False, batch=None,
                allow_tf32=False, reduced_precision_reduction=None, fast_accum=False, c_dtype=None,
                alignments=None, scale_pointers=None, workspace=None):
    """The cuBLASLt call PyTorch makes for C[M, N] = A[M, K] @ B[K, N] (see the module docstring), as a
    dict query() takes. dtypes are torch's names ("float16"); reduced_precision_reduction False keeps
    cuBLAS from merging split-K partials in the output type (torch's allow_*_reduced_precision_reduction,
    applied as PREF_REDUCTION_SCHEME_MASK without OUTPUT_TYPE)."""
    for name in (a_dtype, b_dtype, d_dtype):
        if name not in CUDA_R:
            raise ValueError(f"cuBLASLt query: dtype {name!r} is not one of {', '.join(CUDA_R)}")
    if a_dtype == "float64":
        compute = COMPUTE_64F
    elif a_dtype == "float32" and allow_tf32:
        compute = COMPUTE_32F_FAST_TF32
    else:
        compute = COMPUTE_32F
    mask = REDUCTION_MASK
    if reduced_precision_reduction is False and d_dtype in ("float16", "bfloat16"):
        mask &= ~REDUCTION_OUTPUT_TYPE
    workspace = workspace if workspace is not None else int(os.environ.get("RPSIM_CUBLASLT_WORKSPACE",
                                                                            DEFAULT_WORKSPACE))
    return {"m": N, "n": M, "k": K, "transa": OP_T if b_transposed else OP_N,
            "transb": OP_T if a_transposed else OP_N,
            # cuBLAS's A is torch's B, its B torch's A
            "a": {"type": CUDA_R[b_dtype], "rows": K if b_transposed else N, "cols": N if b_transposed else K,
                  "ld": K if b_transposed else N},
            "b": {"type": CUDA_R[a_dtype], "rows": M if a_transposed else K, "cols": K if a_transposed else M,
                  "ld": M if a_transposed else K},
            "c": {"type": CUDA_R[c_dtype or d_dtype], "rows": N, "cols": M, "ld": N},
            "d": {"type": CUDA_R[d_dtype], "rows": N, "cols": M, "ld": N},
            "compute": compute, "scale_type": CUDA_R["float64" if a_dtype == "float64" else "float32"],
            "batch": batch, "fast_accum": bool(fast_accum), "reduction_mask": mask, "workspace": workspace,
            "alignments": dict(alignments or {}), "scale_pointers": list(scale_pointers or [])}


def _find_library():
    names = ["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"]
    for pattern in ("/usr/local/cuda*/lib64/libcublasLt.so*", "/usr/local/cuda*/targets/*/lib/libcublasLt.so*"):
        names += sorted(glob.glob(pattern), reverse=True)
    try:  # the copy PyTorch's wheel brings (nvidia-cublas-cu1x)
        import nvidia.cublas
        names = sorted(glob.glob(os.path.join(list(nvidia.cublas.__path__)[0], "lib", "libcublasLt.so*"))) + names
    except ImportError:
        pass
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            errors.append(str(e))
    raise CublasLtError("libcublasLt not found (tried " + ", ".join(names[:4]) + " ...)")


def _declare(lib):
    P, PP = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    ci, csz = ctypes.c_int, ctypes.c_size_t
    lib.cublasLtCreate.argtypes = [PP]
    lib.cublasLtDestroy.argtypes = [P]
    lib.cublasLtGetVersion.restype = csz
    lib.cublasLtMatmulDescCreate.argtypes = [PP, ci, ci]
    lib.cublasLtMatmulDescDestroy.argtypes = [P]
    lib.cublasLtMatmulDescSetAttribute.argtypes = [P, ci, P, csz]
    lib.cublasLtMatrixLayoutCreate.argtypes = [PP, ci, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64]
    lib.cublasLtMatrixLayoutDestroy.argtypes = [P]
    lib.cublasLtMatrixLayoutSetAttribute.argtypes = [P, ci, P, csz]
    lib.cublasLtMatmulPreferenceCreate.argtypes = [PP]
    lib.cublasLtMatmulPreferenceDestroy.argtypes = [P]
    lib.cublasLtMatmulPreferenceSetAttribute.argtypes = [P, ci, P, csz]
    lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [P, P, P, P, P, P, P, ci, P, ctypes.POINTER(ci)]
    lib.cublasLtMatmulAlgoConfigGetAttribute.argtypes = [P, ci, P, csz, ctypes.POINTER(csz)]
    lib.cublasLtMatmul.argtypes = [P] * 14 + [csz, P]  # handle ... algo, workspace, its size, stream


class CublasLt:
    """One cuBLASLt handle. lib: a loaded library (tests pass a stand-in with the same functions);
    default: libcublasLt found on the system (CublasLtError when absent). Needs a CUDA device."""

    def __init__(self, lib=None):
        if lib is None:
            lib, self.path = _find_library()
            _declare(lib)
        else:
            self.path = getattr(lib, "_name", "<given>")
        self.lib = lib
        self.version = int(lib.cublasLtGetVersion())
        self.handle = ctypes.c_void_p()
        self._check("cublasLtCreate", lib.cublasLtCreate(ctypes.pointer(self.handle)))

    def close(self):
        if self.handle.value:
            self.lib.cublasLtDestroy(self.handle)
            self.handle = ctypes.c_void_p()

    @staticmethod
    def _check(call, status):
        if status != 0:
            raise CublasLtError(f"{call} failed (cublasStatus_t {status})")

    def _set(self, setter, obj, attr, ctype, value, call):
        v = ctype(value)
        self._check(call, setter(obj, attr, ctypes.cast(ctypes.pointer(v), ctypes.c_void_p), ctypes.sizeof(v)))

    def _layout(self, spec, batch, made):
        lay = ctypes.c_void_p()
        self._check("cublasLtMatrixLayoutCreate", self.lib.cublasLtMatrixLayoutCreate(
            ctypes.pointer(lay), spec["type"], spec["rows"], spec["cols"], spec["ld"]))
        made.append((self.lib.cublasLtMatrixLayoutDestroy, lay))
        if batch:
            setter = self.lib.cublasLtMatrixLayoutSetAttribute
            self._set(setter, lay, LAYOUT_BATCH_COUNT, ctypes.c_int32, batch, "batch count")
            self._set(setter, lay, LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64, spec["rows"] * spec["cols"],
                      "batch stride")
        return lay

    def _describe(self, q, made):
        desc = ctypes.c_void_p()
        self._check("cublasLtMatmulDescCreate",
                    self.lib.cublasLtMatmulDescCreate(ctypes.pointer(desc), q["compute"], q["scale_type"]))
        made.append((self.lib.cublasLtMatmulDescDestroy, desc))
        setter = self.lib.cublasLtMatmulDescSetAttribute
        self._set(setter, desc, DESC_TRANSA, ctypes.c_int32, q["transa"], "transa")
        self._set(setter, desc, DESC_TRANSB, ctypes.c_int32, q["transb"], "transb")
        for attr, ptr in zip((DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER), q["scale_pointers"]):
            self._set(setter, desc, attr, ctypes.c_void_p, ptr, "scale pointer")
        if q["fast_accum"]:
            self._set(setter, desc, DESC_FAST_ACCUM, ctypes.c_int8, 1, "fast accumulation")
        return desc

    def _preference(self, q, made):
        pref = ctypes.c_void_p()
        self._check("cublasLtMatmulPreferenceCreate", self.lib.cublasLtMatmulPreferenceCreate(ctypes.pointer(pref)))
        made.append((self.lib.cublasLtMatmulPreferenceDestroy, pref))
        setter = self.lib.cublasLtMatmulPreferenceSetAttribute
        self._set(setter, pref, PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64, q["workspace"], "workspace")
        if q["reduction_mask"] != REDUCTION_MASK:
            self._set(setter, pref, PREF_REDUCTION_SCHEME_MASK, ctypes.c_uint32, q["reduction_mask"], "reduction mask")
        for name, value in q["alignments"].items():
            self._set(setter, pref, PREF_MIN_ALIGNMENT[name], ctypes.c_uint32, value, f"alignment of {name}")
        return pref

    def heuristic(self, q, run=None):
        """The top algorithm for query q (torch_query): its CONFIG attributes, workspace and waves count,
        the library and its version. CublasLtError when cuBLASLt has no algorithm for it.
        run: device addresses {"a", "b", "c", "d", "workspace"} (cuBLAS's operands) to also run that
        algorithm once (cublasLtMatmul, alpha 1, beta 0, the default stream), for its kernel's name."""
        made = []
        try:
            desc = self._describe(q, made)
            layouts = [self._layout(q[x], q["batch"], made) for x in "abcd"]
            pref = self._preference(q, made)
            results = (HeuristicResult * 1)()
            count = ctypes.c_int(0)
            status = self.lib.cublasLtMatmulAlgoGetHeuristic(self.handle, desc, *layouts, pref, 1,
                                                             ctypes.cast(results, ctypes.c_void_p),
                                                             ctypes.pointer(count))
            self._check("cublasLtMatmulAlgoGetHeuristic", status)
            if count.value < 1 or results[0].state != 0:
                raise CublasLtError(f"cuBLASLt has no algorithm for m={q['m']} n={q['n']} k={q['k']} "
                                    f"(returned {count.value}, state {results[0].state})")
            algo = ctypes.cast(ctypes.pointer(results[0].algo), ctypes.c_void_p)
            out = {name: self._config(algo, attr, ctype) for name, (attr, ctype) in CONFIG.items()}
            if run is not None:
                scalar = ctypes.c_double if q["compute"] == COMPUTE_64F else ctypes.c_float
                alpha, beta = scalar(1), scalar(0)
                ptr = [ctypes.c_void_p(run[x]) for x in "abcd"]
                self._check("cublasLtMatmul", self.lib.cublasLtMatmul(
                    self.handle, desc, ctypes.cast(ctypes.pointer(alpha), ctypes.c_void_p), ptr[0], layouts[0],
                    ptr[1], layouts[1], ctypes.cast(ctypes.pointer(beta), ctypes.c_void_p), ptr[2], layouts[2],
                    ptr[3], layouts[3], algo, ctypes.c_void_p(run["workspace"]), q["workspace"], None))
            out.update(workspace_size=int(results[0].workspaceSize), waves_count=float(results[0].wavesCount),
                       library=os.path.basename(self.path), version=self.version)
            return out
        finally:
            for destroy, obj in reversed(made):
                destroy(obj)

    def _config(self, algo, attr, ctype):
        v, written = ctype(0), ctypes.c_size_t(0)
        status = self.lib.cublasLtMatmulAlgoConfigGetAttribute(
            algo, attr, ctypes.cast(ctypes.pointer(v), ctypes.c_void_p), ctypes.sizeof(v), ctypes.pointer(written))
        return int(v.value) if status == 0 else None
