"""The LLaMA-style example (a model `rpsim train` cannot express) trains a few steps through
rpsim.torch.Trainer under the block-scaled policies mxfp8, nvfp4 and mxfp4 with the FP64 shadow: the loss is
finite, stays near the fp32 run's, and the block-scale columns are written for the block-scaled
layers (nvfp4: all but the last linear, which the recipe keeps in bf16)."""
import math
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "experiments" / "python" / "examples"
sys.path.insert(0, str(EXAMPLES))
import llama_style  # noqa: E402

STEPS = 3


def train(policy, tmp_path):
    model = llama_style.make_model(dim=32, layers=1, heads=2, hidden=64, max_seq=16)
    batches = llama_style.fortunes_batches(4, 16, STEPS + 1)
    t = rt.Trainer(model, policy, lambda p: torch.optim.AdamW(p, lr=1e-3), out=tmp_path / policy, seed=3)
    losses = [t.step(x, y) for x, y in batches[:STEPS]]
    e = t.evaluate(batches[STEPS:])
    t.finish()
    return t, losses, e


@pytest.fixture(scope="module")
def fp32(tmp_path_factory):
    return train("fp32", tmp_path_factory.mktemp("fp32"))


@pytest.mark.parametrize("policy", ["mxfp8", "nvfp4", "mxfp4"])
def test_llama_trains_under_block_scaled_policy(policy, tmp_path, fp32):
    t, losses, e = train(policy, tmp_path)
    _, ref_losses, ref_e = fp32
    assert all(math.isfinite(v) for v in losses)
    assert math.isfinite(e["test_loss_nats"]) and math.isfinite(e["shadow_test_loss_nats"])
    # Near the fp32 run and the FP64 shadow: the initial loss is ln(128) ~ 4.85 nats; FP4 elements
    # move it by a few per cent, not more.
    for got, want in zip(losses, ref_losses):
        assert abs(got - want) < 0.05 * want
    assert abs(e["test_loss_nats"] - e["shadow_test_loss_nats"]) < 0.05 * e["shadow_test_loss_nats"]
    assert abs(e["test_loss_nats"] - ref_e["test_loss_nats"]) < 0.05 * ref_e["test_loss_nats"]
    # The emulation took effect: the loss differs from fp32's.
    assert losses != ref_losses
    cols = (tmp_path / policy / "steps.csv").read_text().splitlines()[0].split(",")
    linears = [n for n, m in t.model.named_modules() if isinstance(m, torch.nn.Linear)]
    scaled = linears[:-1] if policy == "nvfp4" else linears
    assert t.fp8_layers == scaled
    assert f"{scaled[0]}.x_fp8_scale_max" in cols
    assert not any(c.startswith(f"{linears[-1]}.x_fp8") for c in cols) or policy != "nvfp4"
