"""rpsim.torch on a block-scaled Tensor Core instruction (issue #29): a block-scaled policy's GEMMs
take the block scales into the instruction as SFA/SFB through rpsim train's block_matmul, as the CLI
does (byte-identical runs: test_torch_vs_cli.py, mlp-*-tcgen05); an instruction that disagrees with
the recipe (scale format, block, operand pair) or a policy that does not block-scale the GEMM's
inputs is a ValueError naming the argument, checked by the config parser's own rule."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn

MX8 = "tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0"
NV4 = "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3"


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))


def wide(*shape):
    """Values over many binades, so that the instruction's datapath and the binary32 GEMM of the
    dequantised values round differently."""
    return torch.randn(*shape) * torch.exp(3 * torch.randn(*shape))


def step(policy, accumulation=None, seed=0):
    """One forward and backward pass of mlp() under the policy: (output, weight gradients)."""
    model = mlp()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.1 * wide(*p.shape))
    rt.emulate(model, policy, accumulation, seed=seed)
    torch.manual_seed(1)
    y = model(wide(16, 64))
    y.square().sum().backward()
    return y.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("policy,tc", [("mxfp8", MX8), ("nvfp4", NV4)])
def test_the_instruction_as_an_argument_equals_it_in_the_policy(policy, tc):
    # emulate(accumulation=...) in place of the policy's ops.linear.accumulation: the same bits.
    y1, g1 = step(policy, tc)
    y2, g2 = step({"name": policy, "ops": {"linear": {"accumulation": tc}}})
    assert torch.equal(y1, y2)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))
    # ... next to the binary32 GEMM of the dequantised values: a different datapath (an ulp or so of
    # binary32 per GEMM), not a different computation.
    y0, g0 = step(policy)
    assert not torch.equal(y0, y1)
    assert torch.allclose(y0, y1, rtol=1e-4, atol=1e-6 * float(y0.abs().max()))


def test_the_blocked_gemm_is_the_instruction_on_elements_and_block_scales():
    # The forward GEMM of one layer, rebuilt from the trainer's quantiser and rpsim.gemm's SFA/SFB.
    torch.manual_seed(2)
    x, w = wide(8, 64), wide(5, 64)
    layer = nn.Linear(64, 5, bias=False)
    with torch.no_grad():
        layer.weight.copy_(w)
    rt.emulate(layer, "mxfp8", MX8)
    got = layer(x).detach().double().numpy()
    qa, _, _, sa = rpsim._core._torch_block_quantize(x.double().numpy(), "e4m3", "mx", 32, 1)
    qb, _, _, sb = rpsim._core._torch_block_quantize(w.double().numpy().T.copy(), "e4m3", "mx", 32, 0)
    want = rpsim.gemm(qa / sa, qb / sb, model=MX8, sfa=sa[:, ::32].copy(), sfb=sb[::32, :].copy())
    assert np.array_equal(got, np.asarray(want, dtype=np.float64))
    # ... which is not the binary32 GEMM of the dequantised values on these operands.
    plain = nn.Linear(64, 5, bias=False)
    with torch.no_grad():
        plain.weight.copy_(w)
    rt.emulate(plain, "mxfp8")
    assert not np.array_equal(got, plain(x).detach().double().numpy())


@pytest.mark.parametrize("policy,tc,words", [
    # NVFP4 makes blocks of 16; the instruction is asked for 32.
    ("nvfp4", NV4 + ":scale_block=32", ["blocks of 32 (scale_block)", "blocks of 16 (fp8.block_size)"]),
    # MX scales are E8M0.
    ("mxfp4", "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3:scale_block=32", ["takes ue4m3 scales"]),
    # An operand pair the GPU has no block-scaled instruction for (bf16 gradients under MXFP8).
    ({"name": "mxfp8", "ops": {"linear": {"backward_compute": "bfloat16"}}}, MX8, ["no e4m3 x bfloat16 GEMM"]),
    # A policy whose GEMMs take no block-scaled operands.
    ("fp32", MX8, ["does not block-scale"]),
])
def test_a_mismatch_names_the_argument(policy, tc, words):
    with pytest.raises(ValueError) as e:
        rt.emulate(mlp(), policy, tc)
    assert str(e.value).startswith("accumulation")
    for w in words:
        assert w in str(e.value)


def test_a_mismatch_in_the_policy_names_its_field():
    # The policy object as a config writes it: the config parser's message, as `rpsim train` exits 2 with.
    with pytest.raises(ValueError, match=r"policy\.ops\.linear\.accumulation.*blocks of 32"):
        rt.emulate(mlp(), {"name": "nvfp4", "ops": {"linear": {"accumulation": NV4 + ":scale_block=32"}}})


def test_a_gemm_config_with_a_recipe_is_the_emulated_layer():
    # rt.linear under GemmConfig(instruction, recipe=...): the bits of an nn.Linear under emulate(),
    # backward too: NVFP4's stochastic gradient rounding keyed by the layer's (name, step) as rpsim
    # train keys it (emulate's root module is named by its type, at step 0).
    torch.manual_seed(3)
    x, w = wide(8, 64), wide(5, 64)
    for policy, tc in (("mxfp8", MX8), ("nvfp4", NV4)):
        layer = nn.Linear(64, 5, bias=False)
        with torch.no_grad():
            layer.weight.copy_(w)
        rt.emulate(layer, policy, tc)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        wb = w.clone().requires_grad_()
        ya = layer(xa)
        yb = rt.linear(xb, wb, config=rt.GemmConfig(tc, recipe=policy, layer=("Linear", 0)))
        assert torch.equal(ya, yb)
        ya.square().sum().backward()
        yb.square().sum().backward()
        assert torch.equal(xa.grad, xb.grad) and torch.equal(layer.weight.grad, wb.grad)


def test_a_bare_gemm_config_keys_nvfp4_gradient_rounding_by_its_seed_and_stream():
    # Without a layer, the config's own seed and stream key dy's stochastic casts (stream + 3, + 4):
    # the same key draws the same bits, another stream others, and a layer's key yet others.
    torch.manual_seed(5)
    x, w, g = wide(16, 64), wide(8, 64), wide(16, 8)

    def grads(**key):
        xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
        rt.linear(xa, wa, config=rt.GemmConfig(NV4, recipe="nvfp4", **key)).backward(g)
        return xa.grad, wa.grad
    same = grads(seed=1, stream=8)
    assert all(torch.equal(a, b) for a, b in zip(same, grads(seed=1, stream=8)))
    assert not torch.equal(same[0], grads(seed=1, stream=16)[0])
    assert not torch.equal(same[0], grads(seed=1, stream=8, layer=("fc0", 0))[0])
    with pytest.raises(TypeError, match="layer: 'fc0' is not a"):
        rt.GemmConfig(NV4, recipe="nvfp4", layer="fc0")


def test_a_gemm_config_names_what_is_wrong():
    # The instruction needs block scales, which only a block-scaled recipe makes.
    x, w = torch.randn(4, 64), torch.randn(3, 64)
    with pytest.raises(ValueError, match="model: .*block-scaled operands.*recipe="):
        rt.linear(x, w, config=rt.GemmConfig(MX8))
    with pytest.raises(ValueError, match="recipe: policy fp32 does not block-scale"):
        rt.GemmConfig(MX8, recipe="fp32")
    with pytest.raises(ValueError, match=r"^model .*blocks of 32 \(scale_block\)"):
        rt.GemmConfig(NV4 + ":scale_block=32", recipe="nvfp4")
