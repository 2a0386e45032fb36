"""The tensor-core peak as our own wgmma loop's rate (gpu/ceiling_wgmma.cu): its FLOPs, its
constants against the kernel's, and MeasureCeilings' choice between it and cuBLAS, without a GPU."""

from __future__ import annotations

import re
import sys

import pytest

from autotune.gpu.library_tasks import (
    TENSOR_CORE_CEILINGS,
    WGMMA_GROUP,
    WGMMA_ITERATIONS,
    WGMMA_STORAGE,
    WGMMA_WARPGROUPS,
    MeasureCeilings,
    wgmma_peak_flops,
)
from autotune.gpu.timing import TimingPolicy
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import DeviceLimits
from autotune.tuning.baselines import CEILING_WGMMA_SOURCE

TC_NAMES = tuple(TENSOR_CORE_CEILINGS)


def test_the_flops_count_every_wgmma_of_every_warpgroup_and_block():
    # One m64n256k16 wgmma: 64 * 256 * 16 multiply-adds; four a group, two warpgroups a block.
    assert wgmma_peak_flops("bf16", 1, 1) == 2 * 64 * 256 * 16 * 4 * 2 == 4_194_304
    assert wgmma_peak_flops("fp16", 1, 1) == 4_194_304
    assert wgmma_peak_flops("tf32", 1, 1) == 2_097_152  # k8: half the depth a wgmma
    assert wgmma_peak_flops("bf16", 2048, 132) == 4_194_304 * 2048 * 132


def test_the_constants_are_the_kernels():
    text = CEILING_WGMMA_SOURCE.read_text()
    defined = dict(re.findall(r"^#define (\w+) (\d+)\b", text, re.M))
    assert int(defined["WARPGROUPS"]) == WGMMA_WARPGROUPS
    assert int(defined["GROUP_WGMMAS"]) == WGMMA_GROUP
    shapes = {
        "tf32": "m64n256k8.f32.tf32.tf32",
        "fp16": "m64n256k16.f32.f16.f16",
        "bf16": "m64n256k16.f32.bf16.bf16",
    }
    for dtype, storage in WGMMA_STORAGE.items():
        branch = re.search(rf"STORAGE == {storage}\n(.*?)#(?:elif|else)", text, re.S)
        assert branch and f'"{shapes[dtype]}"' in branch.group(1), dtype


class _Session:
    """A GPU session's answers for MeasureCeilings: every timed run takes `time_ms`."""

    def __init__(self, capability: str, time_ms: float = 2.0, sm_count: int = 132) -> None:
        self.capability, self.time_ms, self.sm_count = capability, time_ms, sm_count
        self.loaded: list[bytes] = []
        self.launches: list[tuple] = []

    def info(self) -> DeviceInfo:
        return DeviceInfo("Fake GPU", self.capability, self.sm_count)

    def limits(self) -> DeviceLimits:
        return DeviceLimits(SM_COUNT=self.sm_count)

    def load(self, cubin: bytes, entries: tuple[str, ...]):
        self.loaded.append(cubin)
        return {
            name: lambda grid, block, args: self.launches.append((grid, block, args))
            for name in entries
        }

    def time_runs(self, run, policy) -> list[float]:
        run()
        return [self.time_ms] * 3

    def guarded(self, measure) -> Measurement:
        return measure()


@pytest.fixture
def no_gpu_buffers(monkeypatch):
    """cupy.zeros without a GPU: the loop's output buffer, which it never writes."""
    import cupy

    monkeypatch.setattr(cupy, "zeros", lambda n, dtype: ("buffer", n))


@pytest.fixture
def no_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError


CUBINS = {dtype: f"wgmma {dtype}".encode() for dtype in WGMMA_STORAGE}


def test_on_a_90_device_the_loop_measures_every_peak_without_pytorch(no_gpu_buffers, no_torch):
    session = _Session("9.0", time_ms=2.0, sm_count=132)
    result = MeasureCeilings(b"fma", TimingPolicy(), TC_NAMES, CUBINS).run(session)
    assert [c.name for c in result] == list(TC_NAMES)
    assert session.loaded == [CUBINS[TENSOR_CORE_CEILINGS[name]] for name in TC_NAMES]
    for ceiling in result:
        dtype = TENSOR_CORE_CEILINGS[ceiling.name]
        expected = wgmma_peak_flops(dtype, WGMMA_ITERATIONS, 132) / 2.0e-3 / 1e9
        assert ceiling.value == pytest.approx(expected) and ceiling.unit == "GFlop/s"
        assert "wgmma m64n256" in ceiling.detail and "2 warpgroups x 132 blocks" in ceiling.detail
    grid, block, args = session.launches[0]
    assert grid == (132,) and block == (128 * WGMMA_WARPGROUPS,)
    assert int(args[1]) == WGMMA_ITERATIONS


def test_the_iterations_are_the_tasks(no_gpu_buffers, no_torch):
    session = _Session("9.0", time_ms=4.0)
    task = MeasureCeilings(b"fma", TimingPolicy(), ("tc_peak_bf16",), CUBINS, wgmma_iterations=10)
    (ceiling,) = task.run(session)
    assert {int(args[1]) for _, _, args in session.launches} == {10}
    assert ceiling.value == pytest.approx(wgmma_peak_flops("bf16", 10, 132) / 4.0e-3 / 1e9)


def test_without_its_cubin_or_off_90_a_peak_needs_pytorch(no_gpu_buffers, no_torch):
    # fp16's cubin missing: bf16 by the loop, fp16 left out for want of PyTorch, no failure.
    cubins = {"bf16": CUBINS["bf16"]}
    names = ("tc_peak_bf16", "tc_peak_fp16")
    result = MeasureCeilings(b"fma", TimingPolicy(), names, cubins).run(_Session("9.0"))
    assert [c.name for c in result] == ["tc_peak_bf16"]
    # Another device: the sm_90a cubins cannot run there, so none is loaded.
    session = _Session("10.0")
    assert MeasureCeilings(b"fma", TimingPolicy(), names, CUBINS).run(session) == []
    assert session.loaded == []
