"""The block-scaled cases of test_torch_vs_cli.py (MX with every element format and torchao's RCEIL
rule, NVFP4 under both TE formulas, FP8 block scaling, the B200 tcgen05 instructions, the CNN under
fp8-mx): rpsim.torch.Trainer and `rpsim train` give byte-identical steps.csv, histograms.csv and
evaluations.csv. Their own ctest entry, so that two cores share test_torch_vs_cli's time."""
import pytest

pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
pytest.importorskip("rpsim.torch")
import test_torch_vs_cli as base  # noqa: E402  (the cases and their runner, in the same folder)


def test_the_split_covers_every_block_scaled_policy():
    """The split is by name: every case whose policy block-scales is here, none is lost."""
    for case, spec in base.CASES.items():
        policy = spec.get("policy", "")
        name = policy.get("name", "") if isinstance(policy, dict) else policy
        if name in ("fp8-mx", "mxfp8", "mxfp6", "mxfp4", "nvfp4", "fp8-blockwise"):
            assert case in base.BLOCK_SCALED, case
    assert len(base.BLOCK_SCALED) >= 10


@pytest.mark.parametrize("case", base.BLOCK_SCALED)
def test_block_scaled_steps_histograms_and_evaluations_byte_identical(case, cli_pair):
    t, ref = cli_pair.run(base.CONFIGS, case, base.CASES[case], base.load, base.through_torch)
    cli_pair.same_csvs(t, ref)
