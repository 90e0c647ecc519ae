"""What a new user hit in the first hour (issue 26), from Python: named errors instead of pybind's
"incompatible function arguments", a thread count bounded before OpenMP starts the threads, a run
too large for the machine refused before it starts, the same column names as the CSV files, and
the --infer search that names plain accumulation models."""
import warnings

import numpy as np
import pytest
import rpsim


@pytest.mark.parametrize("call, error, names", [
    (lambda: rpsim.round(np.ones(3), "fp16", "sr", seed=-1), ValueError, "seed = -1"),
    (lambda: rpsim.round(np.ones(3), "fp16", "sr", stochastic_bits=2**40), ValueError, "stochastic_bits"),
    (lambda: rpsim.round(np.ones(3), None), ValueError, "format = None"),
    (lambda: rpsim.round(np.ones(3), 16), TypeError, "format = 16"),
    (lambda: rpsim.encode(np.ones(3), "fp16", stream=2**64), ValueError, "stream"),
    (lambda: rpsim.round_scalar(1.0, "fp16", "sr", index=-5), ValueError, "index = -5"),
    (lambda: rpsim.round(np.ones(3, np.float16), "fp16", out=np.ones(3, np.float16)), TypeError,
     "float16 input is widened to float32"),
    (lambda: rpsim.round(np.ones(3), "fp16", threads=100000), ValueError, "threads = 100000"),
    (lambda: rpsim.gemm(np.ones((2, 2)), np.ones((2, 2)), threads=100000), ValueError, "threads = 100000"),
    # brief K: small A and B asking for a 320 GB D were std::bad_alloc after the copies; checked first now
    (lambda: rpsim.gemm(np.ones((200000, 1)), np.ones((1, 200000)), model="exact:binary32"), ValueError,
     "A is 200000x1 and B 1x200000: the GEMM needs"),
    # A view whose contiguous copy cannot exist (800 TB): ensure() returned null and rpsim.gemm segfaulted
    (lambda: rpsim.gemm(np.lib.stride_tricks.as_strided(np.zeros(1), shape=(10**7, 10**7), strides=(0, 0)),
                        np.ones((1, 1))), MemoryError, "A: its contiguous copy (10000000 x 10000000"),
])
def test_named_errors(call, error, names):
    with pytest.raises(error, match=None) as e:
        call()
    assert names in str(e.value)


SMALL = {"name": "py-first-hour", "model": {"type": "mlp", "hidden": [8]},
         "data": {"name": "synthetic", "synthetic_train_size": 64, "synthetic_test_size": 32},
         "optimizer": {"type": "sgd", "lr": 0.05}, "batch_size": 16, "steps": 2}


def test_a_run_that_cannot_fit_is_refused_before_it_starts(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="the run needs about"):
        rpsim.train(SMALL, out=out, **{"model.hidden": [100000, 100000]})
    with pytest.raises(ValueError, match="batch_size: 1000 is larger than the training set's 64"):
        rpsim.train(SMALL, out=out, batch_size=1000)
    assert not out.exists()  # nothing left behind


def test_whole_epochs_are_announced_and_evaluations_have_the_csv_columns(tmp_path):
    with pytest.warns(UserWarning, match=r"no \"steps\" limit: 4 steps = 1 epoch of 4"):
        r = rpsim.train(SMALL, steps=0, eval_every=2, out=tmp_path / "run", as_frame=False)
    written = (tmp_path / "run" / "evaluations.csv").read_text().splitlines()
    assert list(r.evaluations) == written[0].split(",")
    # The epoch each evaluation's step is in, counted from 1 (0: before training), mid-epoch
    # and at the end alike; it was 0 at step 2 and 1 at step 4.
    assert list(r.evaluations["step"]) == [0, 2, 4]
    assert list(r.evaluations["epoch"]) == [0, 1, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "steps" limit: nothing to announce
        rpsim.train(SMALL, as_frame=False)


def test_infer_names_plain_models_from_python():
    rng = np.random.default_rng(26)
    A = rng.normal(size=(8, 256)).astype(np.float32)
    B = rng.normal(size=(256, 8)).astype(np.float32)
    exact = rpsim.gemm(A.astype(np.float64), B.astype(np.float64), model="exact:binary32")
    r = rpsim.gemm_check(A, B, exact.astype(np.float32), infer=True)
    assert r.ok and r.ranked[0]["model"] == "exact:binary32" and r.ranked[0]["note"] == ""
    assert r.ranked[0]["max_ulps"] == 0
    assert rpsim.gemm_check(A, B, exact.astype(np.float32), model=r.ranked[0]["model"]).ok
    reverse = rpsim.gemm(A[:, ::-1].astype(np.float64), B[::-1, :].astype(np.float64),
                         model="sequential:fp32:rne")
    r = rpsim.gemm_check(A, B, reverse.astype(np.float32), infer=True)
    assert r.ok and r.ranked[0]["model"] == "sequential:fp32:rne"
    assert r.ranked[0]["note"] == "K in decreasing order"
    assert rpsim.gemm_check(A, B, reverse.astype(np.float32), model=r.ranked[0]["model"]).passed < 64
    with pytest.raises(ValueError, match="not both"):
        rpsim.gemm_check(A, B, exact, model="exact:binary32", infer=True)


def test_mismatches_are_named_dump_and_model():
    A = np.eye(2, dtype=np.float32)
    D = np.array([[1, 0], [0, 2]], dtype=np.float32)
    r = rpsim.gemm_check(A, A, D, model="exact:binary32")
    assert r.mismatches[0]["dump"] == 2.0 and r.mismatches[0]["model"] == 1.0
