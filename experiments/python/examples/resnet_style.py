"""A small ResNet-style CNN (He et al. 2016): 3x3 convolutions with BatchNorm, residual blocks with
a 1x1 projection where the shape changes, global average pooling -- layers `rpsim train` cannot
express -- and Fashion-MNIST from Debian's dataset-fashion-mnist package.

Importable: `from resnet_style import make_model, fashion_mnist_batches`; plain PyTorch."""
import gzip
import os
import struct
import sys

import torch
from torch import nn
import torch.nn.functional as F

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNetStyle(nn.Module):
    """(N, 1, 28, 28) images -> (N, 10) logits."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(1, width, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, 2 * width, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def make_model(width=8, seed=0):
    """The model with weights drawn from torch.manual_seed(seed) (the caller's RNG state is kept)."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return ResNetStyle(width)
    finally:
        torch.random.set_rng_state(state)


def _idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = [struct.unpack(">I", data[4 + 4 * i:8 + 4 * i])[0] for i in range(magic & 0xFF)]
    return torch.frombuffer(bytearray(data[4 + 4 * len(dims):]), dtype=torch.uint8).reshape(dims)


def fashion_mnist(split="train"):
    """(images float32 (N, 1, 28, 28) in [0, 1], labels int64), or None where the package is missing."""
    prefix = "train" if split == "train" else "t10k"
    images = os.path.join(FASHION_MNIST, f"{prefix}-images-idx3-ubyte.gz")
    labels = os.path.join(FASHION_MNIST, f"{prefix}-labels-idx1-ubyte.gz")
    if not (os.path.exists(images) and os.path.exists(labels)):
        return None
    return _idx(images).float().div(255).unsqueeze(1), _idx(labels).long()


def fashion_mnist_batches(batch=32, steps=10, seed=0, split="train"):
    """`steps` (images, labels) batches drawn at random; without the package, random images and
    labels, with a message on stderr saying so."""
    g = torch.Generator().manual_seed(seed)
    data = fashion_mnist(split)
    if data is None:
        print(f"resnet_style: {FASHION_MNIST} not found (apt-get install dataset-fashion-mnist): "
              "synthetic images instead", file=sys.stderr)
        data = torch.rand(1000, 1, 28, 28, generator=g), torch.randint(0, 10, (1000,), generator=g)
    x, y = data
    out = []
    for _ in range(steps):
        idx = torch.randint(0, len(y), (batch,), generator=g)
        out.append((x[idx], y[idx]))
    return out


if __name__ == "__main__":
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step, (x, y) in enumerate(fashion_mnist_batches(steps=40), 1):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
