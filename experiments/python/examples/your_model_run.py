"""The run notebook 09 ("your model") draws: the LLaMA-style decoder (llama_style.py) trained on
Debian's fortunes under `fp16-amp` with DeepSpeed's loss scaler, through rpsim.torch.Trainer with
an FP64 shadow, writing rpsim train's files (steps.csv, histograms.csv, evaluations.csv,
meta.json) into one run folder.

  PYTHONPATH=build/python /usr/bin/python3 experiments/python/examples/your_model_run.py \
      --out results/your-model [--steps 60]

The scaler starts at 2^20 (DeepSpeed's config default is 2^16, its DynamicLossScaler class's 2^32)
and grows after 20 clean steps (DeepSpeed's window is 1000), so that within 60 steps the trajectory
shows what DeepSpeed's scaler does: overflowing steps skipped and the scale backed off (after its
hysteresis of 2), then raised again until the next overflow. Measured: 60 steps, 5 skipped, 2^20
-> 2^18 -> 2^19 -> 2^18, in 5.3 s wall on one core (taskset -c 0, start-up included; 28 s on a
core shared with a build)."""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpsim.torch as rt  # noqa: E402
import llama_style  # noqa: E402

SCALER = {"init_scale": 2.0 ** 20, "growth_interval": 20}


def run(out, steps=60, batch=8, seq=32, seed=0, histogram_every=20):
    """Trains `steps` steps and writes the run folder `out`; returns the Trainer's meta."""
    if steps < 1:
        raise ValueError(f"your_model_run: steps={steps} must be at least 1")
    torch.manual_seed(seed)
    model = llama_style.make_model(dim=64, layers=2, heads=4, hidden=172, max_seq=seq, seed=seed)
    train = llama_style.fortunes_batches(batch, seq, steps, seed)
    test = llama_style.fortunes_batches(batch, seq, 2, seed + 1)
    hist = sorted({0, steps - 1, *range(0, steps, histogram_every)})
    t = rt.Trainer(model, "fp16-amp", lambda p: torch.optim.AdamW(p, lr=3e-3),
                   scaler=rt.GradScaler("deepspeed", **SCALER), out=out, seed=seed, name="your-model",
                   histogram_steps=hist)
    t.evaluate(test)
    t.run(train)
    t.evaluate(test)
    return t.finish()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/your-model", help="the run folder (default results/your-model)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    start = time.time()
    meta = run(a.out, a.steps, a.batch, a.seq, a.seed)
    e = meta["evaluations"][-1]
    print(f"your-model (LLaMA-style, fp16-amp, DeepSpeed scaler): {meta['steps']} steps, "
          f"{meta['skipped_steps']} skipped, final loss scale {meta['loss_scaler']['final_scale']:g}, "
          f"test loss {e['test_loss_nats']:.4f} (FP64 shadow {e['shadow_test_loss_nats']:.4f}), "
          f"{time.time() - start:.1f} s; files in {a.out}")


if __name__ == "__main__":
    main()
