"""The C++ tables rpsim.torch reads (the ones the CLI reads, exported by the module, not copied)."""
from torch import nn

from .. import _core

_OPS = _core._torch_ops()
_NAMES = _core._torch_names()


def _names(cls):
    return {n["name"]: n["note"] for n in _NAMES if n["class"] == cls}


# Every name below comes from the C++ tables (sim/train ops.cpp's op table with its torch columns,
# torch_names.cpp for PyTorch's other names): adding a torch op under emulation is a row there.
# The op-table rows by how rpsim.torch runs them: torch function/method name -> row.
KERNELS = {f: o["name"] for o in _OPS if o["torch_kernel"] == "gemm" for f in o["torch_functions"]}
LAYER_KERNELS = {f: o["name"] for o in _OPS if o["torch_kernel"] == "layer" for f in o["torch_functions"]}
ROW_OPS = {f: o["name"] for o in _OPS for f in o["torch_functions"]}
# Leaf module types and the op-table row they are.
MODULE_OPS = {getattr(nn, m): o["name"] for o in _OPS for m in o["torch_modules"]}
# torch.autocast's lists for the ops outside the op table; everything else follows its inputs.
TORCH_LOWER_PRECISION = set(_names("lower_precision")) | set(_names("lower_precision_decomposed"))
TORCH_FP32 = set(_names("fp32")) | set(_names("fp32_decomposed"))
# No arithmetic: the output holds values of the input's format (the rows run as layout too).
LAYOUT = set(_names("layout")) | {f for o in _OPS if o["torch_kernel"] == "layout" for f in o["torch_functions"]}
# GEMMs fused into one PyTorch kernel: refused, with what to write instead; their module types.
FUSED_GEMMS = _names("refused")
FUSED_MODULES = {getattr(nn, m): f for m, f in _names("refused_module").items()}
# Fused modules run as the GEMMs and elementwise ops they are made of (_decompose), some on inputs
# autocast casts first.
DECOMPOSED_NAMES = {**_names("decomposed"), **_names("lower_precision_decomposed"), **_names("fp32_decomposed")}
# The dispatcher's ops that run a GEMM ("aten::mm"): an emulated forward reaches none (_unsupported).
ATEN_GEMMS = set(_names("aten_gemm"))
# In-place ops whose backward reads their own result: run as their out-of-place twin (_inplace).
RESULT_SAVING = frozenset(_names("result_saving"))


def autocast_format(name, autocast):
    """The format autocast (its low format `autocast`) casts the inputs of torch function `name` to: its own
    for the lower-precision list, binary32 for an fp32-list op run decomposed (cdist's matmul runs in
    binary32 inside it), else None (no cast: an fp32-list op's output is rounded to binary32 instead)."""
    if name in TORCH_LOWER_PRECISION:
        return autocast
    return "binary32" if name in TORCH_FP32 and name in DECOMPOSED_NAMES else None


def ops():
    """The op table as {name: row} (name, autocast class, fp8_gemm, help), read from the C++ table."""
    return {row["name"]: row for row in _core._torch_ops()}


def policies():
    """The named policies as {name: description}, read from the C++ table."""
    return {row["name"]: row["description"] for row in _core._torch_policies()}


def policy(spec):
    """The policy row of `spec` (a name of the policy table or a policy object as configs write it) as
    {field: value}, as rpsim train resolves it (weights, gradients, ops, fp8 ...); ValueError naming
    the field and the table's names for a bad one."""
    return _core._torch_policy(spec)


def following(spec, op):
    """Policy `spec` (a name or a policy object) with op `op`'s rule made "follow" (computing in its inputs'
    format, the rule's accumulation kept): the policy objects' per-op override (policy_json.cpp "ops")."""
    obj = {"name": spec} if isinstance(spec, str) else dict(spec)
    obj["ops"] = {**obj.get("ops", {}), op: "follow"}
    return obj


def supported():
    """What emulate puts on rpsim's arithmetic, generated from the tables above and the C++ op table:
    the text error messages end with."""
    kernels = sorted(set(KERNELS) | set(LAYER_KERNELS))
    modules = ", ".join(f"{m.__name__} ({op})" for m, op in MODULE_OPS.items())
    return (f"emulated on rpsim's kernels: torch.{', torch.'.join(k for k in kernels if not k.startswith('_'))}; "
            f"module types with a row of the op table: {modules}; the op table's rows: {', '.join(ops())}; "
            "any other op runs in PyTorch on its inputs' values, its output rounded to its autocast class's "
            "format (rpsim.torch.emulate's summary() lists which)")
