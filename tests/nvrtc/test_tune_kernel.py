"""tune_kernel end to end without a GPU: NVRTC compiles the given kernels, a synthetic evaluator
answers for the GPU worker; results, env, resume, cache file and the check handed to the worker."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from autotune.gpu.given import read_arguments
from autotune.kt import api
from autotune.kt.api import tune_kernel
from autotune.kt.arguments import TuneKernelError
from autotune.model.records import Status
from tests.conftest import SyntheticEvaluator

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VECTOR_ADD = """
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


@pytest.fixture(autouse=True)
def _nvrtc_and_scratch(compiler, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "CACHE_ROOT", tmp_path / "cache")


def vector_add_args(n=1000):
    a = np.linspace(-1, 1, n, dtype=np.float32)
    b = np.ones(n, np.float32)
    return [np.zeros_like(a), a, b, np.int32(n)], [a + b, None, None, None]


def synthetic():
    return SyntheticEvaluator(lambda d: 1.0 + abs(d["block_size_x"] - 256) / 256)


def run(evaluator, tmp_path, **extra):
    arguments, answer = vector_add_args()
    options = {
        "answer": answer,
        "evaluator": evaluator,
        "storage": str(tmp_path / "r.db"),
        "compiler_cache": None,
        "quiet": True,
    }
    return tune_kernel(
        "vector_add",
        VECTOR_ADD,
        1000,
        arguments,
        {"block_size_x": [64, 128, 256, 512]},
        **{**options, **extra},
    )


def test_results_and_env_are_kernel_tuners(tmp_path):
    ev = synthetic()
    given = {}  # the arguments' files live as long as the call: read while the worker has them
    evaluate = ev.evaluate

    def reading(job, timeout_s):
        if not given:
            given.update({k: np.array(v) for k, v in read_arguments(job.check.data).items()})
        return evaluate(job, timeout_s)

    ev.evaluate = reading
    results, env = run(ev, tmp_path, metrics={"GB/s": "12 / time"})
    # Brute force: every config (evaluated as compiled: the GPU takes whichever is ready first).
    assert sorted(r["block_size_x"] for r in results) == [64, 128, 256, 512]
    assert all(r["status"] == "OK" and isinstance(r["time"], float) for r in results)
    best = next(r for r in results if r["block_size_x"] == 256)
    assert best["time"] == 1.0 and len(best["times"]) == 3
    assert best["GB/s"] == pytest.approx(12.0)
    assert env["best_config"]["block_size_x"] == 256
    assert env["device_name"] == "Synthetic GPU" and env["iterations"] == 7
    assert env["study"].startswith("vector_add X=1000,Y=1,Z=1,args=")
    # What the worker got: the plan of Kernel Tuner's conventions, the answer's check.
    job = next(j for j in ev.jobs if j.plan.launches[0].block == (64, 1, 1))
    assert job.plan.launches[0].grid == (16, 1, 1)
    assert job.check.answered == (0,) and job.check.atol == 1e-6
    assert job.check.timing.min_repeats == 7
    np.testing.assert_array_equal(given["answer0"], vector_add_args()[1][0])
    assert not job.check.data.exists()  # removed after the call


def test_a_second_call_resumes_from_the_database(tmp_path):
    run(synthetic(), tmp_path)
    ev = synthetic()
    results, env = run(ev, tmp_path)
    assert ev.jobs == [] and env["new_evaluations"] == 0
    assert len(results) == 4 and all(r["stored"] for r in results)
    # Another problem size is another study.
    arguments, answer = vector_add_args(999)
    ev = synthetic()
    tune_kernel(
        "vector_add",
        VECTOR_ADD,
        999,
        arguments,
        {"block_size_x": [64, 128]},
        answer=answer,
        evaluator=ev,
        storage=str(tmp_path / "r.db"),
        compiler_cache=None,
        quiet=True,
    )
    assert len(ev.jobs) == 2


def test_budget_iterations_and_failures(tmp_path):
    def cost(d):
        return Status.WRONG_RESULT if d["block_size_x"] == 128 else 1.0

    results, env = run(
        SyntheticEvaluator(cost),
        tmp_path,
        strategy="random_sample",
        strategy_options={"max_fevals": 3},
        iterations=11,
        seed=5,
    )
    assert len(results) == 3 and env["strategy"] == "random"
    wrong = [r for r in results if r["block_size_x"] == 128]
    if wrong:
        assert (
            wrong[0]["time"] == "VerificationFailedConfig" and wrong[0]["status"] == "WRONG_RESULT"
        )


def test_cache_file_in_kernel_tuners_format(tmp_path):
    run(synthetic(), tmp_path, cache=str(tmp_path / "vadd"))
    text = (tmp_path / "vadd.json").read_text()
    assert text.endswith("}\n}")  # closed as Kernel Tuner closes it
    data = json.loads(text)
    assert data["kernel_name"] == "vector_add" and data["problem_size"] == [1000]
    assert data["tune_params_keys"] == ["block_size_x"]
    assert data["tune_params"] == {"block_size_x": [64, 128, 256, 512]}
    assert set(data["cache"]) == {"64", "128", "256", "512"}
    entry = data["cache"]["256"]
    assert entry["time"] == 1.0 and entry["block_size_x"] == 256 and len(entry["times"]) == 3
    assert data["cache"]["512"]["time"] == 1.0 + 256 / 256


class Interrupting(SyntheticEvaluator):
    """Stops the run (as Ctrl-C would) at its n-th evaluation."""

    def __init__(self, cost, after: int) -> None:
        super().__init__(cost)
        self.after = after

    def evaluate(self, job, timeout_s):
        if len(self.jobs) == self.after:
            raise KeyboardInterrupt
        return super().evaluate(job, timeout_s)


def test_cache_entries_are_appended_as_measured_and_a_second_call_resumes_from_them(tmp_path):
    path = tmp_path / "vadd.json"
    ev = Interrupting(lambda d: 1.0 + abs(d["block_size_x"] - 256) / 256, after=2)
    run(ev, tmp_path, cache=str(path), strategy="brute_force", storage=str(tmp_path / "a.db"))
    # Interrupted after two results: each was appended as it was measured, and the file still
    # reads as Kernel Tuner reads an open one.
    first = json.loads(path.read_text())["cache"]
    assert len(first) == 2
    # Another database, the same cache file: the two are not measured again.
    again = synthetic()
    results, env = run(again, tmp_path, cache=str(path), storage=str(tmp_path / "b.db"))
    assert len(again.jobs) == 2 and len(results) == 4
    assert env["new_evaluations"] == 2
    assert {k: v["time"] for k, v in first.items()} == {
        k: v["time"] for k, v in json.loads(path.read_text())["cache"].items() if k in first
    }
    assert len(json.loads(path.read_text())["cache"]) == 4


def test_a_cache_file_of_another_kernel_or_size_is_refused_in_one_line(tmp_path):
    path = tmp_path / "vadd.json"
    run(synthetic(), tmp_path, cache=str(path))
    before = path.read_bytes()
    arguments, answer = vector_add_args(500)
    with pytest.raises(TuneKernelError, match="problem_size") as err:
        tune_kernel(
            "vector_add",
            VECTOR_ADD,
            500,
            arguments,
            {"block_size_x": [64, 128]},
            answer=answer,
            evaluator=synthetic(),
            storage=str(tmp_path / "r.db"),
            compiler_cache=None,
            quiet=True,
            cache=str(path),
        )
    assert "\n" not in str(err.value)
    assert path.read_bytes() == before


def test_a_kernel_tuner_cache_is_kept_but_measured_again(tmp_path, capsys):
    path = tmp_path / "vadd.json"
    header = {
        "device_name": "Synthetic GPU",
        "kernel_name": "vector_add",
        "problem_size": [1000],
        "tune_params_keys": ["block_size_x"],
        "tune_params": {"block_size_x": [64, 128, 256, 512]},
        "objective": "time",
        "cache": {"64": {"block_size_x": 64, "time": 0.5}},
    }
    path.write_text(json.dumps(header)[:-2] + ",")  # open, as Kernel Tuner leaves it
    ev = synthetic()
    run(ev, tmp_path, cache=str(path), quiet=False)
    assert len(ev.jobs) == 4  # Kernel Tuner's timing is another protocol: measured again
    assert "measured by Kernel Tuner" in capsys.readouterr().out
    assert json.loads(path.read_text())["cache"]["64"]["time"] == 1.75


def test_compiler_options_defines_and_includes_reach_nvrtc(tmp_path):
    header = tmp_path / "src" / "scale.h"
    header.parent.mkdir()
    header.write_text("#define SCALE 2.0f\n")
    source = header.with_name("scaled.cu")
    source.write_text(
        '#include "scale.h"\n#ifndef MUST_BE_SET\n#error compiler_options not passed\n#endif\n'
        "__global__ void scaled(float *y, const float *x, int n) {\n"
        "    int i = blockIdx.x * BLOCK + threadIdx.x;\n"
        "    if (i < n) y[i] = SCALE * x[i];\n}\n"
    )
    ev = SyntheticEvaluator(lambda d: 1.0)
    arguments, _ = vector_add_args()
    results, _ = tune_kernel(
        "scaled",
        str(source),
        1000,
        [arguments[0], arguments[1], arguments[3]],
        {"bx": [32, 64]},
        block_size_names=["bx"],
        compiler_options=["-DMUST_BE_SET"],
        defines={"BLOCK": "bx"},
        evaluator=ev,
        storage=str(tmp_path / "r.db"),
        compiler_cache=None,
        quiet=True,
    )
    assert [r["status"] for r in results] == ["OK", "OK"]
    # Compiles finish in any order under load: compare the set of defines, not their order.
    assert {job.plan.defines for job in ev.jobs} == {(("BLOCK", "32"),), (("BLOCK", "64"),)}


@pytest.mark.slow  # its unrolled 17 x 17 taps take NVRTC seconds per configuration
def test_the_convolution_example_compiles_with_its_constant_memory(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "conv_example", EXAMPLES / "convolution" / "convolution.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ev = SyntheticEvaluator(lambda d: 1.0 / d["block_size_x"])
    calls = {}

    def ours(*args, **kwargs):
        calls.update(kwargs)
        kwargs.update(evaluator=ev, storage=str(tmp_path / "r.db"), compiler_cache=None, quiet=True)
        return tune_kernel(*args, **kwargs)

    monkeypatch.setattr(module, "tune_kernel", ours)
    monkeypatch.setattr(module, "SIDE", 256)  # a small answer; the kernel is compiled as written
    results, env = module.tune("random_sample", {"max_fevals": 6})
    assert calls["cmem_args"].keys() == {"d_filter"}
    assert len(results) == 6
    assert ev.jobs and all(j.plan.constants == (("d_filter", "cmem:d_filter"),) for j in ev.jobs)
    # A staged tile over 48 KB of static shared memory does not compile, as under Kernel Tuner.
    big = [
        r
        for r in results
        if (r["block_size_y"] * r["tile_size_y"] + 16)
        * (r["block_size_x"] * r["tile_size_x"] + 16)
        * 4
        > 48 * 1024
    ]
    assert all(r["status"] in ("COMPILE_ERROR", "RESOURCES") for r in big)


def test_an_edited_header_makes_the_stored_results_stale(tmp_path):
    # The study's key holds a digest of the source text only; the kernel digest stored with
    # every evaluation also covers the headers it includes: an edited header is other code.
    header = tmp_path / "src" / "scale.h"
    header.parent.mkdir()
    header.write_text("#define SCALE 2.0f\n")
    source = header.with_name("scaled.cu")
    source.write_text(
        '#include "scale.h"\n'
        "__global__ void scaled(float *y, const float *x, int n) {\n"
        "    int i = blockIdx.x * block_size_x + threadIdx.x;\n"
        "    if (i < n) y[i] = SCALE * x[i];\n}\n"
    )
    arguments, _ = vector_add_args()

    def tune():
        ev = SyntheticEvaluator(lambda d: 1.0)
        results, env = tune_kernel(
            "scaled",
            str(source),
            1000,
            [arguments[0], arguments[1], arguments[3]],
            {"block_size_x": [32, 64]},
            evaluator=ev,
            storage=str(tmp_path / "r.db"),
            compiler_cache=None,
            quiet=True,
        )
        return ev, results

    ev, results = tune()
    assert len(ev.jobs) == 2
    ev, results = tune()
    assert ev.jobs == [] and all(r["stored"] for r in results)  # the same code: resumed
    header.write_text("#define SCALE 3.0f\n")
    ev, results = tune()
    assert len(ev.jobs) == 2 and len(results) == 2
    assert not any(r.get("stored") for r in results)
