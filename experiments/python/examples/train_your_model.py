"""Your own PyTorch model under rpsim's emulated precision: the ResNet-style CNN on Fashion-MNIST or
the LLaMA-style decoder on fortunes, under a policy of `rpsim train`'s table, a framework's loss
scaler and an FP64 shadow, writing rpsim train's files (notebooks 03, 05, 07 read them).

  PYTHONPATH=build/python python3 experiments/python/examples/train_your_model.py \
      --model resnet --policy fp16-amp --scaler deepspeed --steps 50 --out runs/resnet-fp16
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpsim.torch as rt  # noqa: E402
import llama_style  # noqa: E402
import resnet_style  # noqa: E402


def build(model, steps, batch, seed):
    """(model, optimizer factory, train batches, test batches)."""
    if model == "resnet":
        return (resnet_style.make_model(seed=seed), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
                resnet_style.fashion_mnist_batches(batch, steps, seed),
                resnet_style.fashion_mnist_batches(256, 2, seed + 1, split="test"))
    return (llama_style.make_model(seed=seed), lambda p: torch.optim.AdamW(p, lr=3e-3),
            llama_style.fortunes_batches(batch, 64, steps, seed), llama_style.fortunes_batches(batch, 64, 2, seed + 1))


def positive(text):
    """An argparse type: a count of at least 1 (--steps 0 or a negative batch ran nothing, or hung)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["resnet", "llama"], default="resnet")
    ap.add_argument("--policy", default="fp16-amp", help="a policy of `rpsim train` (" +
                    ", ".join(rt.policies()) + ")")
    ap.add_argument("--scaler", default=None, help="a loss scaler of the table (none: no scaling)")
    ap.add_argument("--accumulation", default=None, help="every GEMM under this model (tc:h100:fp16:fp32, ...)")
    ap.add_argument("--steps", type=positive, default=20)
    ap.add_argument("--batch", type=positive, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    model, opt, train, test = build(a.model, a.steps, a.batch, a.seed)
    try:  # a bad --policy, --scaler, --accumulation or --out: the message and status 2, not a traceback
        if rt.policy(a.policy)["weights"] == "binary64":  # fp64: a float64 model (emulate refuses a float32 one)
            model = model.double()
        t = rt.Trainer(model, a.policy, opt, scaler=a.scaler, accumulation=a.accumulation, out=a.out, seed=a.seed,
                       name=f"{a.model}-{a.policy}")
    except (ValueError, TypeError, FileExistsError) as e:
        ap.error(str(e))
    t.evaluate(test)
    t.run(train)
    e = t.evaluate(test)
    meta = t.finish()
    print(meta["ops"])
    print(f"{a.model} {a.policy}: {meta['steps']} steps ({meta['skipped_steps']} skipped), test loss "
          f"{e['test_loss_nats']:.4f} (fp64 shadow {e['shadow_test_loss_nats']:.4f}), final loss scale "
          f"{meta['loss_scaler']['final_scale']:g}" + (f"; files in {a.out}" if a.out else ""))
    return t


if __name__ == "__main__":
    main()
