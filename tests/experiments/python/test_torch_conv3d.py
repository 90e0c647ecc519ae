"""nn.Conv3d under rpsim.torch.emulate (rpsim/torch/_conv.py): ATen's CPU conv3d, vol2col columns
(channel, then the kernel's depth, height, width) times the weight on the conv2d row's GEMM, the bias
in its epilogue, the input gradient's col2vol in binary64 rounded once. Checked against PyTorch's
kernel under fp32 (values and every gradient, over stride, padding, dilation, groups), bit for bit
against the same GEMM as an emulated F.linear with a 1x1x1 kernel (forward and input gradient), and
a video-style net trains under every policy family."""
import tempfile

import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional

GEOMETRIES = [dict(), dict(stride=2, padding=1), dict(padding=(1, 2, 0), dilation=(1, 2, 1)),
              dict(stride=(1, 2, 2), groups=2, bias=False)]


@pytest.mark.parametrize("kw", GEOMETRIES, ids=[str(k) for k in GEOMETRIES])
def test_conv3d_under_fp32_is_torchs(kw, is_torchs_under_fp32):
    torch.manual_seed(0)
    is_torchs_under_fp32(nn.Conv3d(4, 6, (3, 3, 2), **kw), torch.randn(2, 4, 5, 7, 6, requires_grad=True))


@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-amp"])
@pytest.mark.parametrize("make,to_linear", [
    (lambda: nn.Conv3d(8, 5, 1), lambda w: w[:, :, 0, 0, 0]),
    (lambda: nn.ConvTranspose3d(8, 5, 1, bias=False), lambda w: w[:, :, 0, 0, 0].t()),
], ids=["conv3d", "conv_transpose3d"])
def test_a_1x1x1_convolution_is_its_linear_bit_for_bit(policy, make, to_linear):
    """With a 1x1x1 kernel no columns overlap: the output is the GEMM's, x's channels times the weight,
    rounded once to the low format, the bits of F.linear on the same values (and so are the input
    and weight gradients). (A transposed convolution's bias joins col2vol's binary64 sum, not the
    GEMM's epilogue: that case has none.)"""
    torch.manual_seed(0)
    m = make()

    class AsLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(to_linear(m.weight.detach()).clone())
            self.b = None if m.bias is None else nn.Parameter(m.bias.detach().clone())

        def forward(self, x):
            return F.linear(x.permute(0, 2, 3, 4, 1), self.w, self.b).permute(0, 4, 1, 2, 3)
    twin = AsLinear()
    x1 = torch.randn(2, 8, 3, 4, 4, requires_grad=True)
    plain = m(x1).detach()
    rt.emulate(m, policy)
    rt.emulate(twin, policy)
    x2 = x1.detach().clone().requires_grad_()
    y1, y2 = m(x1), twin(x2)
    assert torch.equal(y1, y2) and not torch.equal(y1, plain)
    g = torch.randn(y1.shape)
    y1.backward(g)
    y2.backward(g)
    assert torch.equal(x1.grad, x2.grad)
    assert torch.equal(to_linear(m.weight.grad), twin.w.grad)


class Video(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv3d(3, 8, (3, 3, 3), stride=(1, 2, 2), padding=1, bias=False)
        self.bn = nn.BatchNorm3d(8)
        self.block = nn.Conv3d(8, 8, 3, padding=1, groups=2)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        z = F.relu(self.bn(self.stem(x)))
        z = F.relu(self.block(z) + z)
        return self.head(F.adaptive_avg_pool3d(z, 1).flatten(1))


@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-amp", "fp8", "mxfp8", "nvfp4"])
def test_a_video_net_trains_under_every_policy_family(policy):
    torch.manual_seed(0)
    x, y = torch.rand(4, 3, 4, 8, 8), torch.arange(4)
    tr = rt.Trainer(Video(), policy, lambda p: torch.optim.SGD(p, lr=0.2), loss=F.cross_entropy,
                    histogram_steps=(0,))
    losses = [tr.step(x, y) for _ in range(4)]
    assert all(0 < v < 5 for v in losses) and losses[-1] < losses[0]


# nn.ConvTranspose3d (refused before: 3-D U-Nets' decoders): the input gradient of a conv3d, per group one
# GEMM on the conv2d row, its columns summed by col2vol in binary64 with the bias, rounded once.
TRANSPOSED = [dict(), dict(stride=2, padding=1, output_padding=1), dict(stride=(1, 2, 2), dilation=(2, 1, 1)),
              dict(stride=2, groups=2, bias=False)]


@pytest.mark.parametrize("kw", TRANSPOSED, ids=[str(k) for k in TRANSPOSED])
def test_conv_transpose3d_under_fp32_is_torchs(kw, is_torchs_under_fp32):
    torch.manual_seed(1)
    e = is_torchs_under_fp32(nn.ConvTranspose3d(4, 6, (3, 2, 3), **kw), torch.randn(2, 4, 3, 4, 5, requires_grad=True))
    assert e.counts["rpsim kernel"]["conv_transpose3d"] == 1


class UNet3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv3d(2, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose3d(8, 4, 2, stride=2)
        self.head = nn.Conv3d(6, 3, 1)

    def forward(self, x):
        return self.head(torch.cat([F.relu(self.up(F.relu(self.down(x)))), x], dim=1))


@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-amp", "fp8", "mxfp8", "nvfp4"])
def test_a_3d_unet_segments_under_every_policy_family_with_its_telemetry(policy):
    torch.manual_seed(3)
    x, y = torch.rand(2, 2, 4, 8, 8), torch.randint(0, 3, (2, 4, 8, 8))
    with tempfile.TemporaryDirectory() as out:
        tr = rt.Trainer(UNet3d(), policy, lambda p: torch.optim.SGD(p, lr=0.5), loss=F.cross_entropy, out=out,
                        histogram_steps=(0,))
        losses = [tr.step(x, y) for _ in range(4)]
        tr.finish()
        header = open(f"{out}/steps.csv").readline().strip().split(",")
    assert all(0 < v < 5 for v in losses) and losses[-1] < losses[0]
    assert "up_activation_grad_underflow_fraction" in header
