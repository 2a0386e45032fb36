"""Kernel Tuner's in-scope CUDA examples, each run with only its imports changed, through
tune_kernel's mapping, NVRTC and the real GPU worker process holding the synthetic session
(CPU only). Needs Kernel Tuner's examples/cuda directory in AUTOTUNE_KT_EXAMPLES; skipped with
that reason otherwise. A small budget per call (max_fevals 3, the same configurations for any
run): the problem sizes stay the examples' own."""

from __future__ import annotations

import importlib.util

import pytest

from autotune.bench import kt_examples

pytestmark = pytest.mark.slow

IN_SCOPE = [e for e in kt_examples.classification() if e.in_scope]
BUDGET = 3


@pytest.fixture(scope="module")
def directory():
    found = kt_examples.examples_dir(None)
    if found is None or not found.is_dir():
        pytest.skip(f"{kt_examples.ENV} does not name Kernel Tuner's examples/cuda directory")
    return found


@pytest.mark.parametrize("example", IN_SCOPE, ids=lambda e: e.name)
def test_an_in_scope_example_completes_or_says_why_not(example, directory, compiler) -> None:
    # Three, not two: two draw expdist.py's second call at block_size_x 800 and 864, where the
    # other kernel of its file (ExpDist, compiled with it) declares 77 KB of static shared
    # memory, and NVRTC fails both under either tool; the script then adds a failed best's time.
    report = kt_examples.run_example(example, directory, "synthetic", 900, max_fevals=BUDGET)
    status, why = report["status"], report.get("error", "")
    if status == "skipped":
        # Only for what the script needs beyond autotune: a GPU of its own, Kernel Tuner's
        # helpers where Kernel Tuner is not installed, or a package of its own not installed.
        gpu = "gpu" in example.needs and why.startswith("needs a GPU")
        no_kt = importlib.util.find_spec("kernel_tuner") is None
        package = why.removeprefix("needs ").partition(",")[0]
        absent = why.endswith("which is not installed") and not importlib.util.find_spec(package)
        assert gpu or (no_kt and "kernel_tuner" in example.needs) or absent, why
        pytest.skip(why)
    if status == "unsupported":  # one line naming what autotune lacks
        assert why and "\n" not in why
        pytest.skip(f"unsupported: {why}")
    if example.fails:
        assert status == "failed", "a known failure now completes: remove its `fails` line"
        pytest.xfail(example.fails)
    assert status == "ran", why
    assert report["calls"] and all(c["valid"] for c in report["calls"])
    assert all(c["evaluations"] <= BUDGET for c in report["calls"])
