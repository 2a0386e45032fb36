"""The hostile-input suite of issue 38 over the Python API: a bad value of any tune_kernel
argument (hypothesis draws it) raises TuneKernelError with a one-line message before any GPU
work (the stand-in GPU fails the test if it is touched) and leaves the results database
byte-identical."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune.kt.api import tune_kernel
from autotune.kt.arguments import TuneKernelError
from autotune.store import Store
from tests.unit.test_tune_kernel_args import args

NOT_A_NUMBER = st.sampled_from(["7", "abc", None, [], {}, object(), b"1", math.nan, math.inf])
# Per argument, values that are wrong whatever the others are.
BAD = {
    "kernel_name": st.sampled_from(["", "1k", "k<float", "a b", 5, None, b"k", "k\x1b[2J"]),
    "kernel_source": st.sampled_from(
        [5, None, ["a.cu", "b.cu"], lambda: "", "kernels/missing.cu", Path("/no/such.cu"), b"x"]
    ),
    "problem_size": st.sampled_from([-1, 0, "abc", (1, 2, 3, 4), math.nan, 1.5, (), None, True]),
    "arguments": st.sampled_from([None, 5, "abc", [object()], [np.zeros(3, dtype=object)]]),
    "tune_params": st.sampled_from(
        [{}, None, 5, {"block_size_x": []}, {"block_size_x": 5}, {"": [1]}, {"1x": [1]}]
    ),
    "restrictions": st.sampled_from([5, "((", [5], ["__import__('os')"], ["block_size_x <"]]),
    "answer": st.sampled_from([5, "x", [None], [None, None, None, None]]),
    "atol": st.sampled_from(["small", math.nan, -1.0, math.inf, None, [1e-6]]),
    "verify": st.sampled_from([5, "x", [print]]),
    "lang": st.sampled_from(["OpenCL", "C", "HIP", 5]),
    "device": st.sampled_from([-1, "a", 1.5, None, 2**70, True]),
    "platform": st.sampled_from([1, "x"]),
    "texmem_args": st.just({"a": np.zeros(2)}),
    "compiler": st.just("nvcc"),
    "log": st.just(10),
    "simulation_mode": st.just(True),
    "parallel": st.just(True),
    "observers": st.just([object()]),
    "objectives": st.just({"time": False}),
    "compiler_options": st.sampled_from([5, [5], "-O3"]),
    "defines": st.sampled_from([5, {"": 1}, {"1X": 1}, "X=1"]),
    "iterations": st.one_of(st.sampled_from([0, -1]), NOT_A_NUMBER),
    "block_size_names": st.sampled_from([5, ["a", 5], "block_size_x"]),
    "strategy": st.sampled_from(["nope", 5, ""]),
    "strategy_options": st.sampled_from(
        [5, {"nope": 1}, {"max_fevals": -1}, {"max_fevals": "x"}, {"time_limit": math.nan}]
    ),
    "cache": st.sampled_from([5, __file__ + "/x.json", ["c.json"], ""]),
    "metrics": st.sampled_from([5, {"m": 5}, {"m": "import os"}, ["m"]]),
    "objective": st.sampled_from([5, "nope", ""]),
    "seed": st.one_of(
        st.sampled_from([-1, 2**40, 1.5]), NOT_A_NUMBER.filter(lambda v: v is not None)
    ),
    "smem_args": st.sampled_from([5, {"size": "block_size_x *"}, {"size": object()}]),
    "cmem_args": st.sampled_from([5, {"c": 5}, {"": np.zeros(2)}]),
    "grid_div_x": st.sampled_from([5.5, "((", ["__import__('os')"], object()]),
}


class NoGpu:
    """The GPU stand-in: any use of it is a bad input that got past the checks."""

    def __getattr__(self, name):
        raise AssertionError(f"tune_kernel used the GPU ({name}) on a bad argument")


@pytest.fixture(scope="module")
def results_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tk") / "r.db"
    Store(path).close()
    return path


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from(sorted(BAD)), data=st.data())
def test_a_bad_tune_kernel_argument_is_refused_before_any_gpu_work(results_db, name, data):
    value = data.draw(BAD[name], label=name)
    before = hashlib.sha256(results_db.read_bytes()).hexdigest()
    with pytest.raises(TuneKernelError) as refused:
        tune_kernel(
            **args(**{name: value}),
            storage=str(results_db),
            evaluator=NoGpu(),
            compiler_cache=None,
        )
    message = str(refused.value)
    assert message.startswith("tune_kernel: ") and "\n" not in message, message
    assert "\x1b" not in message
    assert hashlib.sha256(results_db.read_bytes()).hexdigest() == before
