"""PyTorch's profiler warning about its event buffer stays out of the user's output; other
warnings do not."""

from __future__ import annotations

import sys
import types
import warnings

import pytest

from autotune.gpu.library_tasks import _launched_kernels

CYCLE_TEXT = (
    "Warning: Profiler clears events at the end of each cycle.Only events from the current "
    "cycle will be reported.To keep events across cycles, set acc_events=True."
)


class _Event:
    name = "sm90_xmma_fprop_implicit_gemm"
    device_type = types.SimpleNamespace(name="CUDA")


class _Profile:
    """Warns as PyTorch's profiler does, at construction, start, stop and when read."""

    def __init__(self, activities):
        warnings.warn(CYCLE_TEXT, UserWarning, stacklevel=2)

    def __enter__(self):
        warnings.warn(CYCLE_TEXT, UserWarning, stacklevel=2)
        return self

    def __exit__(self, *exc):
        warnings.warn(CYCLE_TEXT, UserWarning, stacklevel=2)
        return False

    def events(self):
        warnings.warn(CYCLE_TEXT, UserWarning, stacklevel=2)
        return [_Event()]


@pytest.fixture
def fake_torch(monkeypatch):
    profiler = types.ModuleType("torch.profiler")
    profiler.ProfilerActivity = types.SimpleNamespace(CUDA="cuda")
    profiler.profile = _Profile
    torch = types.ModuleType("torch")
    torch.profiler = profiler
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.profiler", profiler)
    return torch


def test_the_profilers_cycle_warning_is_silenced(fake_torch):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = _launched_kernels(fake_torch, lambda: None)
    assert names == "sm90_xmma_fprop_implicit_gemm"
    assert [str(w.message) for w in caught] == []


def test_other_warnings_of_the_measured_call_still_reach_the_user(fake_torch):
    def run():
        warnings.warn("cuDNN fell back to a slow algorithm", UserWarning, stacklevel=2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _launched_kernels(fake_torch, run)
    assert [str(w.message) for w in caught] == ["cuDNN fell back to a slow algorithm"]
