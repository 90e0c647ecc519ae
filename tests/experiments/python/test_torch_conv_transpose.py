"""nn.ConvTranspose2d / ConvTranspose1d under rpsim.torch.emulate (rpsim/torch/_conv.py): the input
gradient of a conv2d, as CPU PyTorch and cuDNN compute it: one emulated GEMM per group on the conv2d
row, the op core's col2im summing its columns in binary64, the bias there, one rounding to the
GEMM's output format. Checked against PyTorch's own kernels under fp32 (values and every gradient,
every geometry: stride, padding, output_padding, dilation, groups), bit for bit against the same
GEMM written as an emulated F.linear where no column overlaps (a 1x1 kernel), and a decoder trains
under every policy family with its telemetry."""
import tempfile

import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional

GEOMETRIES = [dict(stride=2), dict(stride=2, padding=1, output_padding=1), dict(padding=1, dilation=2),
              dict(stride=2, groups=2), dict(), dict(stride=3, padding=2, bias=False)]


@pytest.mark.parametrize("kw", GEOMETRIES, ids=[str(k) for k in GEOMETRIES])
def test_conv_transpose2d_under_fp32_is_torchs(kw, is_torchs_under_fp32):
    torch.manual_seed(0)
    em = is_torchs_under_fp32(nn.ConvTranspose2d(4, 6, 3, **kw), torch.randn(2, 4, 5, 5, requires_grad=True),
                              grad_atol=2e-5)
    assert em.summary()  # (the op is an rpsim kernel, not refused)


def test_conv_transpose1d_under_fp32_is_torchs():
    torch.manual_seed(0)
    m = nn.ConvTranspose1d(3, 5, 4, stride=2, padding=1)
    x = torch.randn(2, 3, 7)
    want = m(x)
    rt.emulate(m, "fp32")
    torch.testing.assert_close(m(x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-amp"])
def test_a_1x1_transposed_conv_is_its_linear_bit_for_bit(policy):
    """No column overlaps with a 1x1 kernel: the output is the GEMM's, x's channels times the weight,
    rounded once to the low format, the bits of F.linear on the same values under the same policy."""
    torch.manual_seed(0)
    m = nn.ConvTranspose2d(8, 5, 1, bias=False)
    x = torch.randn(3, 8, 4, 4)

    class AsLinear(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.w = nn.Parameter(w[:, :, 0, 0].t().clone())

        def forward(self, x):
            return F.linear(x.permute(0, 2, 3, 1), self.w).permute(0, 3, 1, 2)
    twin = AsLinear(m.weight.detach())
    rt.emulate(m, policy)
    rt.emulate(twin, policy)
    y = m(x)
    assert torch.equal(y, twin(x))
    low = torch.float16 if policy == "fp16-amp" else torch.bfloat16
    assert torch.equal(y, y.to(low).float())
    assert not torch.equal(y, F.conv_transpose2d(x, m.weight.detach()))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, padding=1, stride=2)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.seq = nn.ConvTranspose1d(4, 2, 3, padding=1)
        self.head = nn.Linear(2 * 64, 10)

    def forward(self, x):
        z = F.relu(self.up(F.relu(self.down(x))))
        return self.head(self.seq(z.flatten(2)).flatten(1))


@pytest.mark.parametrize("policy", ["fp16-amp", "fp16-pure", "bf16-amp", "fp8", "mxfp8", "nvfp4"])
def test_a_decoder_trains_under_every_policy_family_with_its_telemetry(policy):
    torch.manual_seed(0)
    x, y = torch.rand(4, 3, 8, 8), torch.arange(4)
    with tempfile.TemporaryDirectory() as out:
        tr = rt.Trainer(Decoder(), policy, lambda p: torch.optim.SGD(p, lr=0.1), loss=F.cross_entropy, out=out,
                        histogram_steps=(0, 1))
        losses = [tr.step(x, y) for _ in range(3)]
        tr.finish()
        header, *rows = open(f"{out}/steps.csv").read().splitlines()
    assert all(0 < v < 5 for v in losses) and losses[-1] < losses[0]
    assert "up_activation_grad_underflow_fraction" in header.split(",") and len(rows) == 3


def test_the_bias_joins_the_binary64_sum_and_the_output_is_rounded_once():
    """Two overlapping columns, 1 and 2^-11, and a bias of 2^-40: their binary64 sum lies just above
    binary16's tie between 1 and 1 + 2^-10 and rounds up; a float32 sum first would land on the
    tie and round to even, 1."""
    m = nn.ConvTranspose2d(1, 1, 2)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([[[[1.0, 1.0], [0.0, 0.0]]]]))
        m.bias.fill_(2.0 ** -40)
    rt.emulate(m, "fp16-amp")
    y = m(torch.tensor([[[[1.0, 2.0 ** -11]]]]))
    assert y.shape == (1, 1, 2, 3)
    assert y[0, 0, 0, 1].item() == 1 + 2.0 ** -10
    assert y[0, 0, 0, 0].item() == 1.0 and y[0, 0, 1, 1].item() == 0.0  # 2^-40 underflows binary16
