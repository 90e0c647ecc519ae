"""Speed of rpsim.torch against `rpsim train`, in one process: the 784-256-256-10 ReLU MLP, batch
128, fp16-amp (binary32 accumulation, PyTorch's loss scaler), forward + backward + SGD step.
`rpsim train`'s step time is the difference of a 110-step and a 10-step run on synthetic data
(no shadow, no evaluation), so loading and set-up cancel; plain PyTorch in binary32 for scale.

  PYTHONPATH=build/python OMP_NUM_THREADS=1 python3 experiments/python/examples/bench_torch.py [--threads 1]
"""
import argparse
import time

import torch
import torch.nn.functional as F

import rpsim
import rpsim.torch as rt

CONFIG = {"name": "bench", "seed": 0, "policy": "fp16-amp",
          "model": {"type": "mlp", "hidden": [256, 256], "activation": "relu"},
          "data": {"name": "synthetic", "synthetic_train_size": 128 * 120, "synthetic_test_size": 16},
          "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}, "batch_size": 128, "shadow": False,
          "loss_scaler": {"policy": "pytorch"}, "telemetry": {"histogram_steps": []}}


def cli_step(threads):
    def run(steps):
        t = time.perf_counter()
        rpsim.train(CONFIG, steps=steps, evaluate=False, as_frame=False, threads=threads)
        return time.perf_counter() - t
    return (run(110) - run(10)) / 100


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 10))


def torch_step(emulated, steps=50):
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    scaler = None
    if emulated:
        opt = rt.emulate(m, "fp16-amp").optimizer(opt)
        scaler = rt.GradScaler("pytorch")
    x, y = torch.rand(128, 784), torch.randint(0, 10, (128,))
    t = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    return (time.perf_counter() - t) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for _ in range(a.repeats):
        c, e, n = cli_step(a.threads), torch_step(True), torch_step(False)
        print(f"rpsim train {c * 1e3:.2f} ms/step, rpsim.torch {e * 1e3:.2f} ms/step (ratio {e / c:.2f}), "
              f"plain PyTorch binary32 {n * 1e3:.2f} ms/step")


if __name__ == "__main__":
    main()
