"""Kernel Tuner's accuracy tuning through tune_kernel, without a GPU: a templated kernel whose
arguments are Tunable (the same data in float, double and half, one per configuration) and
output observers called in the caller's process on the outputs the worker's synthetic session
sends back (the answer as each precision holds it). Their results are result keys, replace the
default check, and are stored so that a resumed call returns them."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.gpu.given import read_arguments
from autotune.gpu.synthetic import SyntheticSession
from autotune.kt import api
from autotune.kt.api import tune_kernel
from autotune.kt.arguments import TuneKernelError
from tests.conftest import SyntheticEvaluator
from tests.kt_tunable import Tunable
from tests.nvrtc.test_templated_kernel import VECTOR_ADD, needs_toolkit

pytestmark = needs_toolkit
DTYPES = {"float": np.float32, "double": np.float64, "half": np.float16}


def precisions(key, array):
    return Tunable(key, {name: array.astype(dtype) for name, dtype in DTYPES.items()})


class MaxError:
    """An output observer as Kernel Tuner's AccuracyObserver is one."""

    def __init__(self, key: str) -> None:
        self.key, self.result = key, None

    def process_output(self, answer, outputs):
        self.result = max(
            float(np.max(np.abs(a - o.astype(np.float64))))
            for a, o in zip(answer, outputs, strict=True)
            if a is not None
        )

    def get_results(self):
        return {self.key: self.result}


class SessionEvaluator(SyntheticEvaluator):
    """The worker's synthetic session, in this process: it sends the outputs back."""

    def __init__(self) -> None:
        super().__init__(lambda d: 1.0)
        self.session = SyntheticSession()
        self.outputs = []

    def evaluate(self, job, timeout_s):
        self.jobs.append(job)
        self.saved = set(read_arguments(job.check.data))
        answer = self.session.evaluate(job)
        self.outputs.append(getattr(answer, "outputs", None))
        return answer


@pytest.fixture(autouse=True)
def _scratch(compiler, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "CACHE_ROOT", tmp_path / "cache")


def tune(tmp_path, evaluator, observers, tunable=precisions, kinds=tuple(DTYPES), **extra):
    n = 500
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    arguments = [np.int32(n), tunable("float_type", a), tunable("float_type", b)]
    arguments.append(tunable("float_type", np.zeros(n)))
    return tune_kernel(
        "vector_add<float_type>",
        VECTOR_ADD,
        n,
        arguments,
        {"block_size_x": [64, 128], "float_type": list(kinds)},
        answer=[None, None, None, a + b],
        observers=observers,
        evaluator=evaluator,
        storage=str(tmp_path / "r.db"),
        compiler_cache=None,
        quiet=True,
        **extra,
    )


def test_each_precision_launches_its_arrays_and_the_observers_measure_its_error(tmp_path):
    evaluator = SessionEvaluator()
    results, _ = tune(tmp_path, evaluator, [MaxError("error_max")])
    assert len(results) == 6 and all(r["status"] == "OK" for r in results)  # half misses atol
    for job, outputs in zip(evaluator.jobs, evaluator.outputs, strict=True):
        kind = dict(job.plan.defines)["float_type"]
        option = list(DTYPES).index(kind)
        assert job.plan.launches[0].args == ("arg0", *(f"arg{i}.{option}" for i in (1, 2, 3)))
        assert job.plan.launches[0].kernel.startswith("_Z10vector_add")
        assert job.check.outputs_back and outputs[3].dtype == DTYPES[kind]
    error = {r["float_type"]: r["error_max"] for r in results}
    assert error["double"] == 0.0 < error["float"] < 1e-6 < error["half"] < 1e-2
    again, _ = tune(tmp_path, SessionEvaluator(), [MaxError("error_max")])  # resumed
    assert all(r.get("stored") for r in again)
    assert {r["float_type"]: r["error_max"] for r in again} == error


def test_without_observers_the_answer_is_checked_in_the_argument_s_precision(tmp_path):
    evaluator = SessionEvaluator()
    results, _ = tune(tmp_path, evaluator, None, verify=lambda answer, out, atol: True)
    assert all(r["status"] == "OK" for r in results) and "error_max" not in results[0]


def test_only_the_options_some_configuration_selects_travel_to_the_worker(tmp_path):
    evaluator = SessionEvaluator()
    results, _ = tune(tmp_path, evaluator, [MaxError("e")], kinds=("float", "double"))
    assert len(results) == 4
    assert evaluator.saved == {"arg0", "answer3"} | {
        f"arg{i}.{j}" for i in (1, 2, 3) for j in (0, 1)
    }


def test_an_observer_that_raises_fails_its_configuration_in_one_line(tmp_path):
    class Broken(MaxError):
        def process_output(self, answer, outputs):
            raise ValueError("no")

    results, _ = tune(tmp_path, SessionEvaluator(), [Broken("e")])
    assert {r["status"] for r in results} == {"WRONG_RESULT"}
    assert results[0]["error"] == "Broken raised ValueError: no"


def test_a_value_the_tunable_lacks_is_one_line_before_the_gpu(tmp_path):
    def two(key, array):
        return Tunable(key, {"float": array.astype(np.float32), "double": array})

    with pytest.raises(TuneKernelError, match=r"arguments\[1\] at .*'half' is not one of"):
        tune(tmp_path, SessionEvaluator(), None, tunable=two, strategy="brute_force")


def test_kernel_tuners_own_tunable_precision_and_accuracy_observer(tmp_path):
    accuracy = pytest.importorskip("kernel_tuner.accuracy")

    def tunable(key, array):
        return accuracy.TunablePrecision(key, array, dict(DTYPES))

    observers = [
        accuracy.AccuracyObserver("RMSE", "error_rmse"),
        accuracy.AccuracyObserver("MRE", "error_relative"),
    ]
    results, _ = tune(tmp_path, SessionEvaluator(), observers, tunable=tunable)
    rmse = {r["float_type"]: r["error_rmse"] for r in results}
    assert rmse["double"] == 0.0 < rmse["float"] < rmse["half"]
    assert all(r["error_relative"] >= 0 for r in results)
