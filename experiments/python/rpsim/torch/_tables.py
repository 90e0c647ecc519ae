"""The C++ tables rpsim.torch reads (the ones the CLI reads, exported by the module, not copied)."""
from .. import _core


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
