"""Block-scaled GEMMs (OCP MX v1.0 blocks with E8M0 scales: fp8-mx, mxfp8, mxfp6, mxfp4; NVIDIA's
NVFP4 recipe: nvfp4) from rpsim.torch: what rpsim train's model builder and config parser decide
before any arithmetic -- the layers a recipe keeps in high precision, and the checks of a block-scaled
instruction against the recipe. The quantisation itself (blocks along K, the random Hadamard
transform, stochastic gradient rounding, the dequantising epilogue) is the op core's GEMM op
(rpsim._core._GemmOp, sim/train gemm_op_block.cpp), the one rpsim train's Linear runs."""
import torch

from .. import _core

SCALINGS = ("mx", "nvfp4", "blockwise")  # the block-scaled recipes (fp8.scaling): the op core quantises them


def high_precision_layers(model, policy):
    """NVFP4's last linear layers kept in bf16 (fp8.high_precision_last), as rpsim train's model
    builder picks them: the names of the last N nn.Linear modules of a block-scaled policy."""
    fp8 = policy.get("fp8", {})
    last = fp8.get("high_precision_last", 0) if fp8.get("scaling") in SCALINGS else 0
    linears = [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    return set(linears[len(linears) - last:]) if last > 0 else set()


def check_accumulation(policy, accumulation, ops=None):
    """ValueError naming `accumulation` (emulate's argument) where it cannot take the place of the
    policy's accumulation on `ops` (default: the ops whose inputs the policy block-scales), checked by
    the config parser's own test of ops.OP.accumulation (a block-scaled instruction against the
    recipe's scale format, block and operand pairs)."""
    if ops is None:
        rules = _core._torch_policy(policy)["ops"]
        ops = [op for op, r in rules.items() if isinstance(r, dict) and r.get("scaled_inputs")] or ["linear"]
        ops.sort(key=lambda op: op != "linear")  # a mismatch named on the op most models have
    _core._torch_check_accumulation(policy, accumulation, ops)


def recipe_state(recipe, model, compute, backward):
    """GemmConfig(recipe=...): (compute, backward) of a block-scaled policy's recipe, the formats
    defaulting to its linear rule's; ValueError naming recipe for a policy that does not block-scale,
    or naming model for an instruction that disagrees with the recipe. (The op core's GEMM op
    quantises: NVFP4's stochastic gradient rounding is keyed by the GemmConfig's layer, else its
    seed and stream.)"""
    policy = _core._torch_policy(recipe)
    if policy.get("fp8", {}).get("scaling") not in SCALINGS:
        raise ValueError(f"recipe: policy {policy['name']} does not block-scale its GEMMs' inputs "
                         f"(a block-scaled policy: mxfp8 mxfp6 mxfp4 nvfp4 fp8-blockwise)")
    rule = policy["ops"]["linear"]
    compute, backward = compute or rule["compute"], backward or rule["backward_compute"]
    spec = dict(recipe) if isinstance(recipe, dict) else {"name": recipe}
    ops = dict(spec.get("ops", {}))
    ops["linear"] = {**ops.get("linear", {}), "compute": compute, "backward_compute": backward}
    spec["ops"] = ops
    _core._torch_check_accumulation(spec, model, ["linear"], "model")
    return compute, backward
