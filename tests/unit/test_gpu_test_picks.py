"""The tc_wgmma GPU tests' draws, checked where there is no GPU.

Each of those tests draws configurations from the family's space and asserts what the draw
covers before it compiles and runs anything. When the space grows (a new tunable such as
FILTERS_M), a draw can break its test's own assumptions, which only a GPU machine would
otherwise show, and only after minutes of compiling (sessions 82 and 83 each lost a GPU test
that way). Here every such test runs with the compile-and-check step stubbed out, against the
sm_90 limits its GPU session would bind, a persistent grid sized by their multiprocessors."""

from __future__ import annotations

import inspect
import re
import types

import pytest

import tests.gpu.test_gpu_tc_wgmma as gpu_tests
from autotune.model.space import ARCH_LIMITS


def _draw_only(fn) -> bool:
    """Whether a GPU test's only uses of the GPU are its evaluator's limits and the final
    compiled_failures(tuner, picks): its draw can run here."""
    body = inspect.getsource(fn)
    uses = re.findall(r"\b(tuner|evaluator)\.(\w+)", body)
    return "compiled_failures(tuner" in body and all(
        (who, what) == ("evaluator", "limits") for who, what in uses
    )


DRAW_ONLY = sorted(
    name
    for name, fn in vars(gpu_tests).items()
    if name.startswith("test_") and callable(fn) and _draw_only(fn)
)


def test_the_draw_only_gpu_tests_are_found() -> None:
    # Most of the file's tests are such draws; a rule that found none would check nothing.
    assert len(DRAW_ONLY) >= 8, DRAW_ONLY
    assert "test_three_consumer_warpgroups_are_correct" in DRAW_ONLY


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
@pytest.mark.parametrize("name", DRAW_ONLY)
def test_a_gpu_tests_draw_meets_its_own_assumptions(monkeypatch, name: str, dtype: str) -> None:
    drawn = []
    monkeypatch.setattr(gpu_tests, "compiled_failures", lambda tuner, picks: drawn.extend(picks))
    limits = ARCH_LIMITS["sm_90"]
    monkeypatch.setattr(gpu_tests, "device_grid", lambda launch: launch.grid_on(limits.SM_COUNT))
    evaluator = types.SimpleNamespace(limits=limits)
    getattr(gpu_tests, name)(tuner=None, evaluator=evaluator, dtype=dtype)
    assert drawn, f"{name} drew nothing to compile"
