"""rpsim.torch.Telemetry on a real PyTorch loop: 20 steps under torch.autocast(bfloat16) on the
CPU, steps.csv's fractions equal to an independent NumPy computation on the same gradients
(rpsim.round's casts, and NumPy's own float16 cast for binary16), histograms and meta.json,
the step `rpsim grads` reads, no hook left after close(), and a clear error with no gradients."""
import csv
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="rpsim.torch needs PyTorch (apt-get install python3-torch)")
import rpsim  # noqa: E402
import rpsim.torch as rt  # noqa: E402

FORMATS = ("binary16", "bfloat16", "e4m3", "e5m2")
SCALE = 2.0 ** -6  # small, so that binary16 and the FP8 formats lose values and something is counted


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 5))


def numpy_counts(g, fmt):
    """(underflow, subnormal, overflow, non-zero finite) of g * SCALE cast by rpsim.round."""
    x = np.asarray(g, dtype=np.float64).reshape(-1)
    nz = np.isfinite(x) & (x != 0)
    r = rpsim.round(x[nz] * SCALE, fmt)
    info = rpsim.format_info(fmt)
    under = int(np.sum(r == 0))
    sub = int(np.sum((r != 0) & (np.abs(r) < info["min_normal"])))
    over = int(np.sum(~np.isfinite(r)))
    if fmt == "binary16":  # NumPy's own IEEE cast agrees
        h = (x[nz] * SCALE).astype(np.float16)
        assert (under, over) == (int(np.sum(h == 0)), int(np.sum(np.isinf(h))))
    return under, sub, over, int(nz.sum())


def train(steps, tel=None, record=None):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    tel = tel(model) if tel else None
    grads = []
    if record is not None:
        def keep(name, g):
            record.setdefault(len(grads), {}).setdefault(name, []).append(g.detach().double().numpy().copy())

        def forward_hook(module, inputs, output, name):
            output.register_hook(lambda g: keep(name, g))

        for name, mod in model.named_modules():
            if name:
                mod.register_forward_hook(lambda m, i, o, name=name: forward_hook(m, i, o, name))
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(16, 12, generator=gen)
        y = torch.randint(0, 5, (16,), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        loss = torch.nn.functional.cross_entropy(out.float(), y)
        loss.backward()
        if tel:
            tel.step(loss)
        grads.append({n: p.grad.detach().double().numpy().copy() for n, p in model.named_parameters()})
        opt.step()
        opt.zero_grad()
    if tel:
        tel.close()
    return model, grads


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_twenty_autocast_steps_match_numpy(tmp_path):
    out = tmp_path / "run"
    acts = {}
    model, grads = train(20, lambda m: rt.Telemetry(m, FORMATS, sample=None, loss_scale=SCALE, out=str(out),
                                                    dump_steps=(7,)), record=acts)
    rows = read_rows(out / "steps.csv")
    assert [int(r["step"]) for r in rows] == list(range(20))
    header = list(rows[0])
    assert header[:8] == ["step", "epoch", "loss_emulated_nats", "loss_fp64_nats", "loss_scale", "skipped",
                          "overflow_found", "grad_norm"]
    assert "0_weight_grad_underflow_fraction" in header and "4_activation_grad_nonfinite_fraction" in header
    checked = nonzero_fractions = 0
    for step, row in enumerate(rows):
        assert float(row["loss_scale"]) == SCALE
        tensors = {f"{n}_grad": g for n, g in grads[step].items()}
        tensors.update({f"{n}_activation_grad": np.concatenate([a.reshape(-1) for a in v])
                        for n, v in acts[step].items()})
        for key, g in tensors.items():
            for fmt in FORMATS:
                under, sub, over, nz = numpy_counts(g, fmt)
                for name, n in (("underflow", under), ("subnormal", sub), ("overflow", over)):
                    got = float(row[f"{key}_{fmt}_{name}_fraction"])
                    assert got == (n / nz if nz else 0.0), (step, key, fmt, name)
                    checked += 1
                    nonzero_fractions += got > 0
            flat = g.reshape(-1)
            assert float(row[f"{key}_zero_fraction"]) == np.sum(flat == 0) / flat.size
            assert float(row[f"{key}_amax"]) == np.max(np.abs(flat))
        norm = math.sqrt(sum(float(np.sum(g ** 2)) for g in grads[step].values()))
        assert float(row["grad_norm"]) == pytest.approx(norm, rel=1e-12)
    assert checked == 20 * (6 + 5) * 4 * 3 and nonzero_fractions > 100  # 6 parameters, 5 module outputs; not all zero
    # under autocast the activation gradients arriving at the bf16 Linear outputs are bf16 already
    assert float(rows[5]["2_activation_grad_bfloat16_underflow_fraction"]) == 0.0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["loss_scale_source"] == "argument loss_scale" and meta["steps_recorded"] == 20
    hist = read_rows(out / "histograms.csv")
    assert list(hist[0]) == ["step", "layer", "tensor", "arithmetic", "log2_abs_bin", "count"]
    w0 = grads[3]["0.weight"].reshape(-1)
    bins = {r["log2_abs_bin"]: int(r["count"]) for r in hist if r["step"] == "3" and r["layer"] == "0.weight"}
    nz = w0[w0 != 0]
    want = dict(zip(*np.unique(np.floor(np.log2(np.abs(nz))).astype(int), return_counts=True)))
    assert {int(k): v for k, v in bins.items() if k not in ("zero", "nonfinite")} == want
    assert (out / "grads_step7.npz").exists()


def test_rpsim_grads_reads_a_dumped_step(tmp_path, run_cli):
    out = tmp_path / "run"
    train(3, lambda m: rt.Telemetry(m, out=str(out), dump_steps=(2,)))
    dump = np.load(out / "grads_step2.npz")
    assert "param_grad/0.weight" in dump.files and "act_grad/4" in dump.files
    r = run_cli("grads", str(out / "grads_step2.npz"), "--out", str(tmp_path / "g"))
    assert "tensors" in r.stdout and (tmp_path / "g" / "fractions.csv").exists()


def test_every_and_a_scaler_are_said(tmp_path):
    class Scaler:  # what rpsim.torch.GradScaler and torch.cuda.amp.GradScaler share
        def get_scale(self):
            return 1.0

    out = tmp_path / "run"
    train(6, lambda m: rt.Telemetry(m, out=str(out), every=3, scaler=Scaler()))
    assert [int(r["step"]) for r in read_rows(out / "steps.csv")] == [0, 3]
    assert "Scaler.get_scale()" in json.loads((out / "meta.json").read_text())["loss_scale_source"]
    scaler = torch.cuda.amp.GradScaler(enabled=False)  # torch's own, disabled without CUDA: scale 1, said by name
    train(1, lambda m: rt.Telemetry(m, out=str(out), scaler=scaler))
    meta = json.loads((out / "meta.json").read_text())
    assert meta["loss_scale_source"] == "torch.cuda.amp.grad_scaler.GradScaler.get_scale()"


def test_detached_telemetry_leaves_no_hook():
    model = make_model()
    tel = rt.Telemetry(model)
    assert any(m._forward_hooks for m in model.modules())
    tel.close()
    assert not any(m._forward_hooks for m in model.modules())
    with pytest.raises(rt.TelemetryError, match="after close"):
        tel.step()


def test_no_gradients_yet_is_a_clear_error():
    tel = rt.Telemetry(make_model())
    with pytest.raises(rt.TelemetryError, match="no gradients yet.*after loss.backward"):
        tel.step()


@pytest.mark.parametrize("kw, match", [({"every": 0}, "every=0"), ({"sample": -1}, "sample=-1"),
                                       ({"loss_scale": float("inf")}, "loss_scale"),
                                       ({"formats": ("binary17",)}, "binary17")])
def test_bad_arguments_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        rt.Telemetry(make_model(), **kw)


@pytest.mark.parametrize("fmt", FORMATS + ("binary32",))  # formats that overflow to inf or NaN
def test_cast_classes_at_the_rounding_ties(fmt):
    """The interval ends (midpoints, ties to even) against rpsim.round on the values at and beside them."""
    from rpsim.torch._gradstats import TensorStats, Thresholds

    info = rpsim.format_info(fmt)
    tiny, normal, big = info["min_positive"], info["min_normal"], info["max_finite"]
    ulp = math.ldexp(1.0, math.frexp(big)[1] - 1 - info["man_bits"])
    ends = [tiny / 2, normal - tiny / 2, big + ulp / 2, tiny, normal, big]
    x = np.array([v * f for v in ends for f in (1 - 2.0 ** -40, 1.0, 1 + 2.0 ** -40)])
    th = Thresholds(fmt)
    s = TensorStats([th])
    s.add(torch.tensor(np.concatenate([x, -x])), [th], 1.0, 1.0, torch.float64)
    r = rpsim.round(np.concatenate([x, -x]), fmt)
    assert s.under[th.name] == np.sum(r == 0)
    assert s.sub[th.name] == np.sum((r != 0) & (np.abs(r) < normal))
    assert s.over[th.name] == np.sum(~np.isfinite(r)) > 0


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        self.scores = q @ k.transpose(-1, -2)  # a functional GEMM no module hook sees
        self.scores.register_hook(lambda g: setattr(self, "scores_grad", g.detach().double().numpy().copy()))
        return torch.matmul(self.scores.softmax(-1), v)


def test_functional_matmuls_are_recorded(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(Attention(), torch.nn.Linear(8, 1))
    tel = rt.Telemetry(model, FORMATS, sample=None, loss_scale=SCALE, out=str(tmp_path))
    model(torch.randn(3, 5, 8)).pow(2).mean().backward()
    tel.step()
    grad = model[0].scores_grad
    tel.close()
    row = read_rows(tmp_path / "steps.csv")[0]
    for fmt in FORMATS:
        under, sub, over, nz = numpy_counts(grad, fmt)
        assert float(row[f"0.matmul#0_activation_grad_{fmt}_underflow_fraction"]) == under / nz
        assert float(row[f"0.matmul#0_activation_grad_{fmt}_subnormal_fraction"]) == sub / nz
    assert "0.matmul#1_activation_grad_amax" in row  # att @ v
    without = rt.Telemetry(model, functional=False)
    model(torch.randn(3, 5, 8)).pow(2).mean().backward()
    without.step()
    assert without.functional_names == []
    without.close()


def test_an_infinite_gradient_is_found_and_the_scaled_step_skipped(tmp_path):
    class Scaler:
        def get_scale(self):
            return 2.0 ** 16

    model = make_model()
    tel = rt.Telemetry(model, out=str(tmp_path), scaler=Scaler())
    for poison in (False, True):
        model(torch.randn(4, 12)).sum().backward()
        if poison:
            model[2].weight.grad[3, 4] = float("inf")  # one value: the sampled counts might miss it
        tel.step()
        model.zero_grad()
    tel.close()
    rows = read_rows(tmp_path / "steps.csv")
    assert [(r["overflow_found"], r["skipped"]) for r in rows] == [("0", "0"), ("1", "1")]
    assert float(rows[0]["loss_scale"]) == 2.0 ** 16 and rows[1]["grad_norm"] == "inf"


RECIPES = ("mxfp8", "nvfp4", "fp8-blockwise")


def test_what_if_recipes_are_each_tensors_recipe_effect(tmp_path):
    """formats=("binary16", "mxfp8", "nvfp4", "fp8-blockwise"): per tensor, the fractions each block-
    scaled policy's gradient quantiser would flush, saturate or leave subnormal -- those of
    rpsim.recipe_effect on the whole gradient (not a sample), and on a gradient made to have them."""
    model = make_model()
    tel = rt.Telemetry(model, formats=("binary16",) + RECIPES, sample=64, out=str(tmp_path / "run"))
    x = torch.randn(16, 12, generator=torch.Generator().manual_seed(3))
    y = torch.randint(0, 5, (16,), generator=torch.Generator().manual_seed(4))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    # One weight gradient with a known mix: in each 32-block one value 1 and the rest 2^-40, far
    # below any element format's reach from a scale set by 1 (E4M3's smallest subnormal 2^-9).
    g = model[2].weight.grad
    tiny = torch.full_like(g, 2.0 ** -40)
    tiny.view(-1)[::32] = 1.0
    g.copy_(tiny)
    tel.step(loss)
    tel.close()
    with open(tmp_path / "run" / "steps.csv") as f:
        row = next(csv.DictReader(f))
    for name, p in model.named_parameters():
        for r in RECIPES:
            e = rpsim.recipe_effect(p.grad.detach().reshape(-1).float().numpy(), r)
            got = [float(row[f"{name}_grad_{r}_{c}"]) for c in ("underflow_fraction", "saturated_fraction",
                                                                 "subnormal_fraction")]
            assert got == pytest.approx([e["underflow"], e["saturated"], e["subnormal"]], abs=1e-12), (name, r)
    for r in RECIPES:
        # 31 of every 32 (and of every 128-wide fp8-blockwise block, 124 of 128 ... all but the ones) flush
        assert float(row[f"2.weight_grad_{r}_underflow_fraction"]) == pytest.approx(31 / 32), r
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["recipes"] == list(RECIPES) and meta["formats"] == ["binary16"]


def test_what_if_unknown_name_is_a_named_error():
    with pytest.raises(rt.UnknownFormatError, match="'mxfp9'"):
        rt.Telemetry(make_model(), formats=("binary16", "mxfp9"))
    with pytest.raises(rt.UnknownFormatError, match="'fp16-amp'"):  # a policy, but not block-scaled
        rt.Telemetry(make_model(), formats=("fp16-amp",))
