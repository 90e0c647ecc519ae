"""The proof that rpsim.torch and `rpsim train` are one core: the shipped mlp-* and cnn configs, written as
plain torch modules with the CLI's initial weights and batches (rpsim.torch.from_config), give
byte-identical steps.csv, histograms.csv and evaluations.csv through rpsim.torch.Trainer and rpsim.train
(issue #27), for every named policy of the policy table, gradient accumulation over micro-batches, study-fixed-point.json's q16.14 policy object
(round to nearest), an MLP with LayerNorm and GELU, and the gpt configs' optimizer (AdamW, warmup and
cosine decay, clipping). The gpt configs: test_torch_vs_cli_gpt.py; the block-scaled cases of CASES run
from test_torch_vs_cli_block_scaled.py (a ctest entry of their own, so that two cores share the time)."""
import json
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")

CONFIGS = pathlib.Path(__file__).resolve().parents[3] / "experiments" / "configs"
STEPS = 20  # past step 15, where mlp-fp8's e5m2 casts of the logits' gradient first flush entries


def load(name, **changes):
    # A case may run fewer steps and evaluate on one batch (a slow GEMM).
    steps, test_limit = changes.pop("steps", STEPS), changes.pop("test_limit", 2000)
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    cfg.update(changes)
    cfg["steps"] = steps
    cfg["evaluate"] = True  # once, after the last step (no eval_every in these configs)
    cfg["data"] = {**cfg.get("data", {}), "test_limit": test_limit}  # 2000: two evaluation batches
    return cfg


def through_torch(cfg):
    model, batches, test, _ = rt.from_config(cfg, cfg["steps"], with_test=True)
    opt = cfg["optimizer"]
    scaler = dict(cfg.get("loss_scaler", {}))
    policy = scaler.pop("policy", None)
    t = rt.Trainer(model, cfg["policy"], optimizer(opt), rt.RpsimLoss("cross_entropy", cfg["policy"]),
                   scaler=rt.GradScaler(policy, **scaler) if policy else None, seed=cfg.get("seed", 0),
                   histogram_steps=cfg.get("telemetry", {}).get("histogram_steps", []),
                   max_grad_norm=cfg.get("max_grad_norm", 0.0), lr_schedule=rt.lr_schedule(cfg),
                   gradient_accumulation_steps=cfg.get("gradient_accumulation_steps", 1),
                   grad_accum_format=cfg.get("grad_accum_format"))
    t.run(batches)
    t.evaluate(test, epoch=1)  # the CLI labels a run that stops mid-epoch with epoch 1
    return t


def optimizer(opt):
    if opt.get("type", "sgd") == "sgd":
        return lambda p: rt.SGD(p, lr=opt["lr"], momentum=opt.get("momentum", 0.0),
                                weight_decay=opt.get("weight_decay", 0.0))
    return lambda p: rt.AdamW(p, lr=opt["lr"], betas=opt.get("betas", (0.9, 0.999)), eps=opt.get("eps", 1e-8),
                              weight_decay=opt.get("weight_decay", 0.0), decoupled=opt["type"] == "adamw")


# The gpt-* configs' optimizer (AdamW, warmup and cosine decay) on the MLP, clipped at 0.5 (most steps' norm
# is above it), past the warmup (5) and the decay (15) within the test's 20 steps.
ADAMW = {"optimizer": {"type": "adamw", "lr": 0.002, "betas": [0.9, 0.99], "eps": 1e-08, "weight_decay": 0.1,
                       "warmup_steps": 5, "decay_steps": 15, "min_lr": 0.0002}, "max_grad_norm": 0.5}


LN_GELU = {"type": "mlp", "hidden": [256, 256], "activation": "gelu", "layer_norm": True}


def fixed_point(rounding):
    rule = {"compute": "q16.14", "output": "q16.14"}
    return {"name": "fp32", "weights": "q16.14", "gradients": "q16.14", "rounding": rounding,
            "update_rounding": rounding,
            "ops": {"linear": {**rule, "accumulation": "sequential:binary64:rne"}, "relu": rule}}


TCGEN05 = {"base": "mlp-fp8", "steps": 5, "test_limit": 1000}


def tcgen05(policy, instruction):
    return {"name": policy, "ops": {"linear": {"accumulation": instruction}}}


CASES = {
    # The FP64 policy: from_config builds a float64 model holding the CLI's binary64 initial weights,
    # and Trainer feeds it binary64 batches (the policy's data format).
    "mlp-fp64": {"base": "mlp-fp32", "policy": "fp64"},
    "cnn-fp16-amp": {}, "mlp-fp32": {}, "mlp-fp16-amp": {}, "mlp-bf16-amp": {}, "mlp-bf16-pure": {}, "mlp-fp8": {},
    # fp16-amp without loss scaling, and bf16-pure with stochastically rounded updates.
    "mlp-fp16-amp-noscale": {"base": "mlp-fp16-amp", "loss_scaler": {"policy": "none"}},
    "mlp-bf16-pure-sr": {"base": "mlp-bf16-pure", "policy": {"name": "bf16-pure", "update_rounding": "sr"}},
    # Stochastic updates across skipped steps: PyTorch's scaler from 2^24 skips steps 0-3 and 9 (the
    # optimizer's draws are keyed by the steps it applied, in both front-ends).
    "mlp-fp16-pure-sr-skips": {"base": "mlp-fp16-amp", "policy": {"name": "fp16-pure", "update_rounding": "sr"},
                               "loss_scaler": {"policy": "pytorch", "init_scale": 2.0 ** 24}, "steps": 14},
    # Gradient accumulation (DeepSpeed's gradient_accumulation_steps): micro-batches seeded with
    # binary32(scale / k), gradients summed by the op core's accumulate_gradient, the underflow columns
    # the micro-batches' mean; with skipped steps (PyTorch's scaler from 2^24), binary16 sums under
    # fp16-pure (underflow in them), a bfloat16 accumulator (grad_accum_format), and under NVFP4's
    # stochastic gradients (block-scaled).
    "mlp-fp16-amp-accum": {"base": "mlp-fp16-amp", "gradient_accumulation_steps": 2, "steps": 8,
                           "loss_scaler": {"policy": "pytorch", "init_scale": 2.0 ** 24}},
    "mlp-fp16-pure-accum": {"base": "mlp-fp16-amp", "policy": "fp16-pure", "gradient_accumulation_steps": 4,
                            "steps": 6},
    "mlp-fp16-amp-accum-bf16": {"base": "mlp-fp16-amp", "gradient_accumulation_steps": 2,
                                "grad_accum_format": "bfloat16", "steps": 6},
    "cnn-fp16-amp-accum": {"base": "cnn-fp16-amp", "gradient_accumulation_steps": 2, "steps": 4, "test_limit": 1000},
    "mlp-nvfp4-accum": {"base": "mlp-fp8", "policy": "nvfp4", "gradient_accumulation_steps": 4, "steps": 5},
    # Compensated updates (the Kahan compensation in rpsim.torch.SGD's state, bfloat16).
    "mlp-bf16-kahan": {},
    # The remaining rows of the policy table on the shipped MLP.
    "mlp-fp16-pure": {"base": "mlp-fp16-amp", "policy": "fp16-pure"},
    "mlp-fp8-current": {"base": "mlp-fp8", "policy": "fp8-current"},
    "mlp-fp8-delayed": {"base": "mlp-fp8", "policy": "fp8-delayed"},
    # MX blocks of 32 with E8M0 scales (the trainer's block quantiser, block_quantize_recipe).
    "mlp-fp8-mx": {"base": "mlp-fp8", "policy": "fp8-mx"},
    "cnn-fp8-mx": {"base": "cnn-fp16-amp", "policy": "fp8-mx", "loss_scaler": {"policy": "none"}},
    # The other MX rows go through the same block-scale path (e3m2 and e2m1 elements).
    "mlp-mxfp8": {"base": "mlp-fp8", "policy": "mxfp8"},
    "mlp-mxfp6": {"base": "mlp-fp8", "policy": "mxfp6"},
    "mlp-mxfp4": {"base": "mlp-fp8", "policy": "mxfp4"},
    # NVFP4's recipe: 16-element blocks under a per-tensor scale, 16x16 weight tiles, the Hadamard
    # transform on the weight-gradient GEMM's inputs, stochastic gradients, the last linear in bf16.
    "mlp-nvfp4": {"base": "mlp-fp8", "policy": "nvfp4"},
    # The recipes as their reference implementations run them (issue #37): TE's Float8BlockScaling
    # (1x128 blocks, 128x128 weight tiles, power-of-two scales, the blockwise GEMM's k-tile fold),
    # torchao's RCEIL scale rule, TE's NVFP4 block-scale formula before commit 523801d.
    "mlp-fp8-blockwise": {"base": "mlp-fp8", "policy": "fp8-blockwise"},
    "mlp-mxfp8-rceil": {"base": "mlp-fp8", "policy": {"name": "mxfp8", "fp8": {"scale_rule": "rceil"}}},
    "mlp-nvfp4-te-2026-02": {"base": "mlp-fp8", "policy": {"name": "nvfp4", "fp8": {"nvfp4_formula": "te-2026-02"}}},
    # The same recipes on B200's block-scaled Tensor Core instructions (issue #29): the block scales go
    # into the GEMM as SFA/SFB, each GEMM's operand pair (e4m3 x e5m2 in backward) on its own
    # instruction, NVFP4's last linear on the unscaled bf16 instruction. 5 steps: at 20, mxfp8's case
    # took 119 s against mlp-mxfp8's 28 s (one run, load 15), and both runs leave the binary32 path's
    # bits by step 0 (mxfp8: fc0's distance from FP64) and step 2 (nvfp4: the loss); one evaluation batch.
    "mlp-mxfp8-tcgen05": {**TCGEN05, "policy": tcgen05("mxfp8", "tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0")},
    "mlp-nvfp4-tcgen05": {**TCGEN05, "policy": tcgen05("nvfp4", "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3")},
    # Fixed point (Gupta et al. 2015, study-fixed-point.json's policy objects): q16.14 weights,
    # gradients and Linear/ReLU arithmetic, rounded to nearest. (Its "rounding": "sr" rows run under
    # rpsim.torch too, but not byte-identically: the CLI keys each tensor rounding of a stochastic
    # policy by a count of its rounding calls in C++ order (ScopedTensorRounding), which the torch
    # ops do not replay.)
    "mlp-q16.14-rne": {"base": "mlp-fp32", "policy": fixed_point("rne")},
    # LayerNorm and GELU (the gpt configs' ops outside the GEMMs) on rpsim's C++ layers.
    "mlp-fp32-ln-gelu": {"base": "mlp-fp32", "model": LN_GELU},
    "mlp-bf16-amp-ln-gelu": {"base": "mlp-bf16-amp", "model": LN_GELU},
    "mlp-fp16-pure-ln-gelu": {"base": "mlp-fp16-amp", "policy": "fp16-pure", "model": LN_GELU},
    "mlp-fp16-amp-adamw": {"base": "mlp-fp16-amp", **ADAMW},
    "mlp-bf16-pure-adam": {"base": "mlp-bf16-pure", **ADAMW, "optimizer": {**ADAMW["optimizer"], "type": "adam"}},
}


# The block-scaled cases (MX, NVFP4, FP8 block scaling, the tcgen05 instructions): run by
# test_torch_vs_cli_block_scaled.py.
BLOCK_SCALED = sorted(c for c in CASES if any(k in c for k in ("mx", "nvfp4", "blockwise", "tcgen05")))


@pytest.mark.parametrize("case", sorted(set(CASES) - set(BLOCK_SCALED)))
def test_steps_histograms_and_evaluations_byte_identical(case, cli_pair):
    t, ref = cli_pair.run(CONFIGS, case, CASES[case], load, through_torch)
    cli_pair.same_csvs(t, ref)
    if case.endswith("-skips"):  # the case is about skipped steps: it has some, and steps applied after
        skipped = [row.split(",")[5] for row in t.steps_csv.splitlines()[1:]]
        assert "1" in skipped[:4] and "0" in skipped[4:], skipped


def test_kahan_needs_an_optimizer_that_carries_the_compensation():
    model, _, _ = rt.from_config(load("mlp-bf16-kahan"), 1)
    emu = rt.emulate(model, "bf16-kahan")
    with pytest.raises(ValueError, match="Kahan.*rpsim.torch.SGD.*not SGD"):
        emu.optimizer(torch.optim.SGD(model.parameters(), lr=0.1))


def test_an_unemulated_scaling_is_refused_by_name():
    model, _, _ = rt.from_config(load("mlp-fp8"), 1)
    with pytest.raises(ValueError, match="nvfp8"):
        rt.emulate(model, {"name": "fp8", "fp8": {"scaling": "nvfp8"}})

