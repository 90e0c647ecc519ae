"""rpsim.torch's names and marks (_marks): an op reaches the emulation's tables by the name PyTorch
gives it, an overload called directly (torch.ops.aten.unsqueeze.default) by its op's name."""
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")


class Direct(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = torch.ops.aten.unsqueeze.default(self.fc(x), 0)  # as torchvision's RAFT reaches it
        return torch.ops.aten.mul.Tensor(y, y)


def test_an_overload_called_directly_takes_its_ops_path():
    m = Direct()
    em = rt.emulate(m, "fp16-amp")
    out = m(torch.randn(2, 4))
    summary = em.summary()
    assert "layout: unsqueeze x1" in summary and "binary32: mul x1" in summary
    assert "unsqueeze.default" not in summary and out.shape == (1, 2, 3)
    assert out._rpsim_format == "binary16"  # mul follows its binary16 inputs, rounded so
