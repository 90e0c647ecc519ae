#!/usr/bin/env python3
"""Writes the gradients of one PyTorch training step as an .npz that
`rpsim grads FILE.npz` reads: every parameter gradient as
`param_grad/<name>` and, for every Conv2d and Linear module, the gradient
arriving at its output as `act_grad/<module>` (a full backward hook).

Use it as a recipe inside your own training loop; the lines that matter are
`attach` (before the step) and `save` (after loss.backward()). Run alone, it
trains torchvision's ResNet-18 for a few steps on random images as a demo
(needs torch and torchvision, which this project does not install):

    python3 experiments/python/dump_grads.py --steps 200 --out grads.npz
    build/rpsim grads grads.npz --out results/grads

Tensors larger than --sample entries are a uniform random sample of that
many entries (the histograms and fractions need no more), flat binary32.
"""
import argparse

import numpy as np


def attach(model, store, kinds=None):
    """Records dL/d(output) of every Conv2d and Linear module into `store`."""
    import torch

    kinds = kinds or (torch.nn.Conv2d, torch.nn.Linear)
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, kinds):
            def hook(mod, grad_input, grad_output, name=name):
                if grad_output[0] is not None:
                    store[f"act_grad/{name}"] = grad_output[0].detach().float().cpu().numpy()
            handles.append(module.register_full_backward_hook(hook))
    return handles


def save(path, model, store, sample=100_000, seed=0):
    """Parameter gradients plus the recorded activation gradients, flat float32."""
    rng = np.random.default_rng(seed)
    arrays = dict(store)
    for name, p in model.named_parameters():
        if p.grad is not None:
            arrays[f"param_grad/{name}"] = p.grad.detach().float().cpu().numpy()
    out = {}
    for name, a in arrays.items():
        flat = np.ascontiguousarray(a, dtype=np.float32).reshape(-1)
        if flat.size > sample:
            flat = flat[rng.choice(flat.size, sample, replace=False)]
        out[name] = flat
    np.savez_compressed(path, **out)


def main():
    import torch
    import torchvision

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", default="grads.npz")
    ap.add_argument("--sample", type=int, default=100_000)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    w = torch.randn(10, 3 * 32 * 32)
    store = {}
    for step in range(args.steps + 1):
        x = torch.randn(128, 3, 32, 32)
        y = (x.flatten(1) @ w.T).argmax(1)  # labels a fixed linear function of the pixels
        handles = attach(model, store) if step == args.steps else []
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if step == args.steps:
            save(args.out, model, store, args.sample)
            for h in handles:
                h.remove()
        else:
            opt.step()
    print("wrote", args.out, "with", len(np.load(args.out).files), "tensors")


if __name__ == "__main__":
    main()
