"""The files rpsim.torch writes (issue #36): a bad out= folder is refused when Trainer or Telemetry is
made, not after the whole run; the README's five-line loop stopped by Ctrl-C keeps every step it
finished (steps are written as they end); files get the mode the umask gives, as the CLI's (0644
under 022, not mkstemp's 0600); Trainer prints progress lines as `rpsim train` does, none with
quiet=True."""
import json
import os
import stat
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def batches(n):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)) for _ in range(n)]


def bad_folders(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    return [(str(a_file), "File exists|Not a directory"), (str(a_file / "sub"), "Not a directory"),
            ("/proc/rpsim-out", "No such file|Permission denied|not permitted")]


def test_a_bad_out_is_refused_before_step_0(tmp_path):
    for out, reason in bad_folders(tmp_path):
        with pytest.raises(rt.OutputDirError, match=rf"rpsim.torch.Trainer: out='{out}' cannot hold the run's "
                                                   rf"files: ({reason})"):
            rt.Trainer(mlp(), "fp16-amp", out=out, quiet=True)
        with pytest.raises(rt.OutputDirError, match=rf"rpsim.torch.Telemetry: out='{out}' cannot hold"):
            rt.Telemetry(mlp(), out=out)
        assert issubclass(rt.OutputDirError, OSError)
    # finish(out=...) to another folder checks that one before writing anything
    t = rt.Trainer(mlp(), "fp32", quiet=True, out=tmp_path / "good")
    t.step(*batches(1)[0])
    with pytest.raises(rt.OutputDirError, match="a_file"):
        t.finish(tmp_path / "a_file")
    # the model is free again after a refused Trainer: nothing was put on it
    m = mlp()
    with pytest.raises(rt.OutputDirError):
        rt.Trainer(m, "fp16-amp", out=str(tmp_path / "a_file"), quiet=True)
    rt.emulate(m, "fp16-amp")


def steps_on_disk(folder):
    with open(folder / "steps.csv") as f:
        return [line.split(",")[0] for line in f.read().splitlines()[1:]]


def test_an_interrupted_five_line_loop_keeps_its_finished_steps(tmp_path):
    out = tmp_path / "runs" / "mine"
    trainer = rt.Trainer(mlp(), "fp16-amp", lambda p: torch.optim.SGD(p, lr=0.05),
                         scaler=rt.GradScaler("deepspeed"), out=out, quiet=True, histogram_steps=(0, 2))
    with pytest.raises(KeyboardInterrupt):
        for i, (x, y) in enumerate(batches(10)):  # the README's loop; Ctrl-C after 3 steps
            if i == 3:
                raise KeyboardInterrupt
            trainer.step(x, y)
        trainer.finish()
    assert steps_on_disk(out) == ["0", "1", "2"]
    assert (out / "steps.csv").read_text() == trainer.steps_csv  # the rows as finish() would write them
    assert (out / "histograms.csv").read_text() == trainer.histograms_csv
    meta = json.loads((out / "meta.json").read_text())  # (replaced at most once a second while running)
    assert 1 <= meta["steps"] <= 3 and meta["partial"] is True
    assert sorted(os.listdir(out)) == ["evaluations.csv", "histograms.csv", "meta.json", "steps.csv"]
    trainer.finish()  # the run may still be finished: whole files, not partial
    assert json.loads((out / "meta.json").read_text())["partial"] is False
    # Ctrl-C inside a step: the steps before it are on disk
    t2 = rt.Trainer(mlp(), "fp32", out=tmp_path / "inside", quiet=True)
    calls = []

    def loss(out, y):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return torch.nn.functional.cross_entropy(out, y)
    t2.loss_fn = loss
    with pytest.raises(KeyboardInterrupt):
        for x, y in batches(5):
            t2.step(x, y)
    assert steps_on_disk(tmp_path / "inside") == ["0", "1"]


def test_an_interrupted_telemetry_loop_keeps_its_recorded_steps(tmp_path):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    tel = rt.Telemetry(model, out=tmp_path / "tel", every=2, sample=None)
    with pytest.raises(KeyboardInterrupt):
        for i, (x, y) in enumerate(batches(10)):
            if i == 5:
                raise KeyboardInterrupt
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            tel.step(loss)
            opt.step()
            opt.zero_grad()
    assert steps_on_disk(tmp_path / "tel") == ["0", "2", "4"]
    meta = json.loads((tmp_path / "tel" / "meta.json").read_text())
    assert 1 <= meta["steps_recorded"] <= 3 and meta["closed"] is False
    hist = (tmp_path / "tel" / "histograms.csv").read_text().splitlines()
    assert {line.split(",")[0] for line in hist[1:]} == {"0", "2", "4"}
    tel.close()
    assert json.loads((tmp_path / "tel" / "meta.json").read_text())["closed"] is True
    assert steps_on_disk(tmp_path / "tel") == ["0", "2", "4"]


SCRIPT = """
import sys, torch, rpsim.torch as rt
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
trainer = rt.Trainer(model, "fp16-amp", out=sys.argv[1], quiet=True)
tel = rt.Telemetry(torch.nn.Sequential(torch.nn.Linear(6, 3)), out=sys.argv[2])
for i in range(10):
    if i == 3:
        raise KeyboardInterrupt  # Ctrl-C in the README's loop, ending the script
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    trainer.step(x, y)
    torch.nn.functional.cross_entropy(tel.model(x), y).backward()
    tel.step()
trainer.finish()
"""


def test_a_script_stopped_by_ctrl_c_leaves_meta_json_up_to_date(tmp_path):
    import subprocess
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "t"), str(tmp_path / "tel")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "KeyboardInterrupt" in r.stderr
    assert steps_on_disk(tmp_path / "t") == ["0", "1", "2"]
    meta = json.loads((tmp_path / "t" / "meta.json").read_text())
    assert meta["steps"] == 3 and meta["partial"] is True  # written at exit
    tel = json.loads((tmp_path / "tel" / "meta.json").read_text())
    assert tel["steps_recorded"] == 3 and tel["closed"] is False
    assert steps_on_disk(tmp_path / "tel") == ["0", "1", "2"]


def modes(folder):
    return {p: stat.S_IMODE(os.stat(folder / p).st_mode) for p in os.listdir(folder)}


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_files_take_the_umask_mode(tmp_path, umask, mode, source_dir):
    previous = os.umask(umask)
    try:
        t = rt.Trainer(mlp(), "fp16-amp", out=tmp_path / "trainer", quiet=True)
        for x, y in batches(2):
            t.step(x, y)
        assert set(modes(tmp_path / "trainer").values()) == {mode}  # written during the run
        t.finish()
        model = mlp()
        with rt.Telemetry(model, out=tmp_path / "tel", dump_steps=(0,)) as tel:
            x, y = batches(1)[0]
            torch.nn.functional.cross_entropy(model(x), y).backward()
            tel.step()
        with rt.capture_gemms(tmp_path / "cap", model="sequential:binary32:rne"):
            model(x).sum().backward()
        sys.path.insert(0, str(source_dir / "experiments" / "python" / "examples"))
        import llama_study
        llama_study._write_atomic(str(tmp_path / "study.csv"), "a,b\n")
    finally:
        os.umask(previous)
        if sys.path and sys.path[0].endswith("examples"):
            sys.path.pop(0)
    for folder in ("trainer", "tel", "cap"):
        found = modes(tmp_path / folder)
        assert found and set(found.values()) == {mode}, (folder, {k: oct(v) for k, v in found.items()})
    assert "grads_step0.npz" in modes(tmp_path / "tel")
    assert stat.S_IMODE(os.stat(tmp_path / "study.csv").st_mode) == mode


def test_progress_lines_as_the_cli_prints_them(tmp_path, capsys, monkeypatch):
    from rpsim.torch import _progress
    monkeypatch.setattr(_progress, "FIRST_S", 0.0)
    monkeypatch.setattr(_progress, "INTERVAL_S", 0.0)
    t = rt.Trainer(mlp(), "fp16-amp", name="mine")
    for x, y in batches(2):
        t.step(x, y)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[1].startswith("rpsim.torch.Trainer mine: 2 steps, ")
    assert "steps/s" in err[1] and "loss " in err[1] and "scale 65536" in err[1] and "ETA" not in err[1]
    t.run(batches(3), epochs=2)  # a known total: percentage and ETA
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("rpsim.torch.Trainer mine: 3/8 steps (38%), ") and "ETA" in err[0]
    assert err[-1].startswith("rpsim.torch.Trainer mine: 8/8 steps (100%)") and ", done; loss " in err[-1]
    quiet = rt.Trainer(mlp(), "fp16-amp", quiet=True)
    for x, y in batches(2):
        quiet.step(x, y)
    assert capsys.readouterr().err == ""
    # a real cadence: nothing before the first two seconds
    monkeypatch.undo()
    t = rt.Trainer(mlp(), "fp16-amp")
    t.step(*batches(1)[0])
    assert capsys.readouterr().err == ""


def test_the_nonfinite_fraction_is_torchs_count_on_every_carrier():
    # _nonfinite counts in the op core, reading float32/float64 where they lie: the same fraction as
    # torch.isfinite for every dtype, layout and size (chunks of 512 in the core).
    from rpsim.torch._run_files import _nonfinite
    torch.manual_seed(0)
    for n in (1, 511, 512, 513, 3000):
        x = torch.randn(n) * 1e4
        x[torch.randperm(n)[: n // 3]] = float("inf")
        x[torch.randperm(n)[: n // 5]] = float("nan")
        x[torch.randperm(n)[: n // 7]] = float("-inf")
        for t in (x, x.double(), x.half(), x.bfloat16(), x.reshape(1, -1).t(), x[::2],
                  x.clone().requires_grad_()):
            want = float((~torch.isfinite(t.detach())).sum()) / t.numel()
            assert _nonfinite(t) == want, (n, t.dtype)
    assert _nonfinite(torch.zeros(0)) == 0.0


def test_the_zero_vs_fp64_fraction_is_torchs_predicate_on_every_carrier():
    # _zero_vs counts in the op core: entries zero in the emulated tensor where the reference is
    # nonzero and finite, the same fraction as the torch predicate for every dtype pair and layout.
    from rpsim.torch._run_files import _zero_vs
    torch.manual_seed(1)
    for n in (1, 512, 1300):
        ref = torch.randn(n, dtype=torch.float64)
        ref[torch.randperm(n)[: n // 4]] = 0.0
        ref[torch.randperm(n)[: n // 9]] = float("inf")
        ref[torch.randperm(n)[: n // 11]] = float("nan")
        emu = ref.float().clone()
        emu[torch.randperm(n)[: n // 3]] = 0.0
        emu[torch.randperm(n)[: n // 5]] = -0.0
        for e in (emu, emu.double(), emu.bfloat16(), emu[None].t().reshape(-1)):
            for r in (ref, ref.float(), ref.reshape(1, -1).t()):
                want = float(((e == 0) & (r.reshape(-1) != 0) & torch.isfinite(r.reshape(-1))).sum()) / n
                assert _zero_vs(e, r) == want, (n, e.dtype, r.dtype)
    assert _zero_vs(torch.zeros(0), torch.zeros(0)) == 0.0
    assert _zero_vs(torch.zeros(2), torch.ones(3)) == 0.0
