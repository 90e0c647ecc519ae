"""The shipped gpt-* configs through rpsim.torch byte-identical to `rpsim train` (issue #27): the GPT
written as a plain torch module (rpsim.torch._gpt.GPT, built by from_config with the CLI's initial
weights and batches) under rpsim.torch.Trainer gives the CLI's steps.csv, histograms.csv and
evaluations.csv bytes: embeddings, pre-LN blocks, causal attention (the CLI's softmax kernel, its
scaling as an elementwise mul), the tied lm_head (its own rule; the two gradients of the shared table
summed by autograd in binary32 and rounded to the gradients' format, as the CLI adds them), AdamW with
nanoGPT's decay groups, warmup and cosine decay, clipping and the fp16 loss scaler; every shipped gpt
config and the pure policies (fp16-pure, bf16-pure with stochastic updates). Shrunk (a few steps, a small
test set) to stay quick."""
import json
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")

CONFIGS = pathlib.Path(__file__).resolve().parents[3] / "experiments" / "configs"
STEPS = 4


def load(name, **changes):
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    cfg.update(changes)
    cfg["steps"] = STEPS
    cfg["evaluate"] = True  # once, after the last step
    cfg.pop("eval_every", None)
    # Warmup and decay inside the few steps, so the schedule's both phases are compared.
    cfg["optimizer"] = {**cfg["optimizer"], "warmup_steps": 2, "decay_steps": 3}
    cfg["data"] = {**cfg.get("data", {}), "test_limit": 16}
    cfg["telemetry"] = {"histogram_steps": [0, STEPS - 1]}
    return cfg


def decay_groups(params):
    """nanoGPT's configure_optimizers: weight decay on the matrices (dim >= 2) only."""
    params = list(params)
    return [{"params": [p for p in params if p.dim() >= 2]},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def through_torch(cfg):
    model, batches, test, _ = rt.from_config(cfg, STEPS, with_test=True)
    opt = cfg["optimizer"]
    scaler = dict(cfg.get("loss_scaler", {}))
    policy = scaler.pop("policy", None)
    t = rt.Trainer(model, cfg["policy"],
                   lambda p: rt.AdamW(decay_groups(p), lr=opt["lr"], betas=opt["betas"], eps=opt["eps"],
                                      weight_decay=opt["weight_decay"]),
                   rt.RpsimLoss("cross_entropy", cfg["policy"]),
                   scaler=rt.GradScaler(policy, **scaler) if policy else None, seed=cfg.get("seed", 0),
                   histogram_steps=cfg["telemetry"]["histogram_steps"],
                   max_grad_norm=cfg.get("max_grad_norm", 0.0), lr_schedule=rt.lr_schedule(cfg))
    t.run(batches)
    t.evaluate(test, epoch=1)  # the CLI labels a run that stops mid-epoch with epoch 1
    return t


CASES = {"gpt-fp32": {}, "gpt-bf16-amp": {}, "gpt-fp16-amp": {}, "gpt-fp16-amp-noscale": {}, "gpt-fp8": {},
         # Pure policies: the tied table's two gradients each in bfloat16 / binary16 before their sum (the
         # embedding's rounded by its rule's output format), the residual's gradients summed in x's format;
         # with stochastic updates, each table's draws in the CLI's (column-major) element order.
         "gpt-fp16-pure": {"base": "gpt-fp32", "policy": "fp16-pure"},
         "gpt-bf16-pure-sr": {"base": "gpt-fp32", "policy": {"name": "bf16-pure", "update_rounding": "sr"}},
         # The FP64 policy: from_config builds a float64 GPT holding the CLI's binary64 initial weights, and
         # Trainer feeds it binary64 batches (the policy's data format), every op on rpsim's binary64 kernels.
         "gpt-fp64": {"base": "gpt-fp32", "policy": "fp64"}}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpt_steps_histograms_and_evaluations_byte_identical(name, cli_pair):
    t, ref = cli_pair.run(CONFIGS, name, CASES[name], load, through_torch)
    # The CLI's layer columns: wte, h<i>_attn, h<i>_mlp, ln_f (lm_head holds no parameter of its own).
    header = t.steps_csv.splitlines()[0]
    assert header == ref["steps_csv"].splitlines()[0]
    assert "h1_attn_weight_grad_underflow_fraction" in header and "ln_f_weight_update_stalled_fraction" in header
    cli_pair.same_csvs(t, ref)


def test_under_fp64_the_gpt_is_float64_holding_the_cli_binary64_weights():
    cfg = load("gpt-fp32", policy="fp64")
    model, _, _ = rt.from_config(cfg, 1)
    raw = rpsim._core._torch_train_setup(cfg, [], 1)["parameters"]["h0.attn.c_attn.weight"]
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert torch.equal(model.h0_attn.c_attn.weight, torch.from_numpy(raw).T)
    assert not torch.equal(model.h0_attn.c_attn.weight, torch.from_numpy(raw).T.float().double())  # not binary32's


def test_the_tied_head_takes_the_lm_head_rule_and_softmax_the_cli_kernel():
    model, batches, _ = rt.from_config(load("gpt-fp16-amp"), 1)
    emu = rt.emulate(model, "fp16-amp")
    model(batches[0][0])
    summary = emu.summary()
    assert "linear (lm_head) x1" in summary
    assert "softmax x2" in summary and "matmul x4" in summary
    assert "layer_norm x5" in summary


def test_softmax_kernel_masks_minus_infinity_as_the_causal_mask():
    # Row i keeps its first i + 1 entries: the same bits as the attention's causal softmax, the
    # masked entries exactly 0 in the output and in the gradient.
    s = torch.randn(6, 6, dtype=torch.float64)
    keep = torch.tril(torch.ones(6, 6, dtype=torch.bool))
    masked = s.masked_fill(~keep, float("-inf"))
    p = torch.from_numpy(rpsim._core._torch_softmax(masked.numpy(), "binary32"))
    assert torch.equal(p[~keep], torch.zeros(int((~keep).sum()), dtype=torch.float64))
    ref = torch.softmax(masked.float(), dim=-1).double()
    assert torch.allclose(p, ref, rtol=1e-6, atol=0)
    dp = torch.randn(6, 6, dtype=torch.float64)
    ds = torch.from_numpy(rpsim._core._torch_softmax_backward(p.numpy(), dp.numpy(), masked.numpy(), "binary32"))
    assert torch.equal(ds[~keep], torch.zeros(int((~keep).sum()), dtype=torch.float64))
    expect = p * (dp - (dp * p).sum(-1, keepdim=True))
    assert torch.allclose(ds, expect, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="softmax backward"):
        rpsim._core._torch_softmax_backward(p.numpy(), dp[:3].numpy(), masked.numpy(), "binary32")


def test_rpsim_layers_groups_parameters_and_names_a_missing_module():
    model, batches, _ = rt.from_config(load("gpt-fp32"), 1)
    t = rt.Trainer(model, "fp32", lambda p: rt.AdamW(p, lr=1e-3), rt.RpsimLoss("cross_entropy", "fp32"),
                   scaler="none", shadow=False)
    # One layer per name, each holding every parameter inside it (h0_attn: ln_1, c_attn, c_proj).
    assert [name for name, _ in t.layers] == model.rpsim_layers
    assert sum(p.numel() for p in dict(t.layers)["h0_attn"].parameters()) == \
        sum(p.numel() for n, p in model.named_parameters() if n.startswith("h0_attn."))
    model.rpsim_layers = ["wte", "h9_attn"]
    with pytest.raises(ValueError, match="h9_attn"):
        rt.Trainer(model, "fp32", lambda p: rt.AdamW(p, lr=1e-3), scaler="none", shadow=False)


def test_telemetry_of_a_real_run_names_the_gpt_layers_as_the_cli(tmp_path):
    # rpsim.torch.Telemetry on the plain torch GPT (no emulation): its layer columns are rpsim train's.
    cfg = load("gpt-fp32")
    model, batches, _ = rt.from_config(cfg, 1)
    tel = rt.Telemetry(model, formats=("binary16",), sample=None)
    x, y = batches[0]
    loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y)
    loss.backward()
    tel.step(loss)
    tel.close()
    cli = rpsim._core._train({**cfg, "steps": 1, "evaluate": False}, [], str(tmp_path), 0, False)
    columns = cli["steps_csv"].splitlines()[0].split(",")
    assert tel.columns[:len(columns)] == columns
    # The weight columns see every parameter of a block, the norm each parameter once.
    i = columns.index("h0_attn_weight_grad_nonfinite_fraction")
    assert tel.rows[0][i] == 0.0
    norm = sum(float(p.grad.double().pow(2).sum()) for p in model.parameters()) ** 0.5
    assert tel.rows[0][columns.index("grad_norm")] == pytest.approx(norm, rel=1e-12)
