"""rpsim.accumulation_kinds and rpsim.accumulation_spec: the accumulation-kind table of
sim/accumulation (accumulation_kinds.cpp) as Python sees it, and a spec string and a dict naming
the same model."""
import numpy as np
import pytest
import rpsim

# A spec string and the dict naming the same model, per kind.
SAME = [
    ("sequential:bf16:sr:seed=7", {"kind": "sequential", "format": "bf16", "rounding": "sr", "seed": 7}),
    ("fma:fp16:rtz", {"kind": "fma", "format": "fp16", "rounding": "rtz"}),
    ("pairwise:fp16", {"kind": "pairwise", "format": "fp16"}),
    ("blocked:8:bf16", {"kind": "blocked", "block": 8, "format": "bf16"}),
    ("compensated:fp16", {"kind": "kahan", "format": "fp16"}),
    ("exact:fp32:rd", {"kind": "exact", "format": "fp32", "rounding": "rd"}),
    ("tc:a100:fp16:fp32:terms_per_step=4", {"kind": "tc", "preset": "a100", "terms_per_step": 4}),
    ("kernel:h100:fp16:fp32:split_k=3",
     {"kind": "kernel", "gpu": "h100", "input": "fp16", "output": "fp32", "split_k": 3}),
    ("cublas:h100:bf16:bf16:rpr=1", {"kind": "cublas", "gpu": "h100", "input": "bf16", "output": "bf16", "rpr": 1}),
    ("eigen", {"kind": "eigen"}),
]


def test_every_kind_is_listed_with_usage_and_help():
    kinds = rpsim.accumulation_kinds()
    names = [k["name"] for k in kinds]
    assert names == ["sequential", "fma", "pairwise", "blocked", "kahan", "exact", "tc", "kernel", "cublas", "eigen"]
    for k in kinds:
        assert k["usage"] and k["help"], k
    assert next(k for k in kinds if k["name"] == "sequential")["aliases"] == ["recursive"]
    # Every kind is covered by SAME below.
    tested = {rpsim.accumulation_spec(spec).split(":")[0] for spec, _ in SAME}
    assert tested == set(names)


@pytest.mark.parametrize("spec,as_dict", SAME, ids=[s for s, _ in SAME])
def test_spec_and_dict_name_the_same_model(spec, as_dict):
    canonical = rpsim.accumulation_spec(spec)
    assert rpsim.accumulation_spec(canonical) == canonical
    assert rpsim.accumulation_spec(as_dict) == canonical
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 40))
    b = rng.standard_normal((40, 3))
    np.testing.assert_array_equal(rpsim.gemm(a, b, model=spec), rpsim.gemm(a, b, model=as_dict))


def test_bad_models_raise_named_errors():
    with pytest.raises(ValueError, match="unknown kind 'magic'.*sequential fma pairwise"):
        rpsim.accumulation_spec("magic")
    with pytest.raises(ValueError, match="split_k"):
        rpsim.accumulation_spec({"kind": "kernel", "gpu": "h100", "input": "fp16", "output": "fp32", "split_k": "x"})
    with pytest.raises(ValueError, match="tc takes no seed"):
        rpsim.accumulation_spec({"kind": "tc", "preset": "h100", "seed": 1})
    with pytest.raises(TypeError):
        rpsim.accumulation_spec(3)
