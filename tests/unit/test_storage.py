"""Storage of the problem dtypes (gpu/storage.py) and the ceilings a device lacks, without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.gpu.storage import (
    BF16_NAN,
    array_dtype,
    bf16_bits,
    bf16_values,
    nan_fill,
    stored_values,
    to_storage,
)
from autotune.tuning.baselines import CEILING_NAMES, baseline_tolerance, missing_ceilings


def _bits(value: float) -> int:
    return int(np.array([value], dtype=np.float32).view(np.uint32)[0])


def _from_bits(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def test_bf16_keeps_values_it_can_hold():
    exact = np.array([0.0, -0.0, 1.0, -2.5, 0.15625, np.inf, -np.inf, 3.0e38], dtype=np.float32)
    exact = bf16_values(bf16_bits(exact))  # 3e38 is not a BF16 value: round it first
    assert np.array_equal(bf16_values(bf16_bits(exact)), exact)
    assert bf16_bits(np.float32(1.0)) == 0x3F80 and bf16_bits(np.float32(-2.0)) == 0xC000


def test_bf16_rounds_to_nearest_ties_to_even():
    one = _bits(1.0)  # 0x3F800000; BF16 keeps the top 16 bits
    cases = {
        one + 0x7FFF: 0x3F80,  # below half: down
        one + 0x8000: 0x3F80,  # half, even below: stays even
        one + 0x8001: 0x3F81,  # above half: up
        one + 0x18000: 0x3F82,  # half, odd below (0x3F81): up to even
        one + 0x17FFF: 0x3F81,
        _bits(-1.0) + 0x8001: 0xBF81,  # negative: magnitude rounds the same way
        0x7F7FFFFF: 0x7F80,  # the largest FP32 rounds to infinity
    }
    values = np.array([_from_bits(b) for b in cases], dtype=np.float32)
    assert bf16_bits(values).tolist() == list(cases.values())


def test_bf16_rounding_matches_float64_nearest_on_random_values():
    rng = np.random.default_rng(5)
    x = (rng.random(20000, dtype=np.float32) * 2 - 1) * np.float32(7.0)
    got = bf16_values(bf16_bits(x)).astype(np.float64)
    # The two BF16 neighbours of each value: truncation and one step away from zero.
    low = bf16_values((x.view(np.uint32) >> 16).astype(np.uint16)).astype(np.float64)
    high = bf16_values(((x.view(np.uint32) >> 16) + 1).astype(np.uint16)).astype(np.float64)
    assert np.all((got == low) | (got == high))
    nearest = np.where(np.abs(x - low) <= np.abs(high - x), low, high)
    ties = np.abs(x - low) == np.abs(high - x)
    assert np.array_equal(got[~ties], nearest[~ties])
    assert np.max(np.abs(got - x) / np.abs(x)) <= 2.0**-8


def test_bf16_nan_is_the_quiet_nan():
    assert bf16_bits(np.array([np.nan, -np.nan], dtype=np.float32)).tolist() == [BF16_NAN] * 2
    assert np.isnan(bf16_values(np.uint16(BF16_NAN)))


@pytest.mark.parametrize(
    ("dtype", "array", "bytes_"),
    [("fp32", "float32", 4), ("tf32", "float32", 4), ("fp16", "float16", 2), ("bf16", "uint16", 2)],
)
def test_storage_types_and_their_nan(dtype, array, bytes_):
    assert array_dtype(dtype) == array and np.dtype(array).itemsize == bytes_
    poison = nan_fill(dtype)
    assert poison.dtype == np.dtype(array)
    assert np.isnan(stored_values(np.array([poison]), dtype)).all()


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16"])
def test_stored_values_are_the_rounded_draw(dtype):
    x = np.random.default_rng(1).random(1000, dtype=np.float32) * 2 - 1
    stored = to_storage(x, dtype)
    values = stored_values(stored, dtype)
    bound = {"fp32": 0.0, "tf32": 0.0, "fp16": 2.0**-11, "bf16": 2.0**-8}[dtype]
    assert values.dtype == np.float64
    assert np.all(np.abs(values - x) <= bound * np.abs(x) + 2.0**-24)


def test_a_device_with_the_fp32_ceilings_gets_only_the_tensor_core_ones():
    old = ("fma_peak", "copy_bandwidth", "sgemm")
    assert missing_ceilings(old) == ("tc_peak_tf32", "tc_peak_bf16", "tc_peak_fp16")
    assert missing_ceilings(CEILING_NAMES) == ()
    assert missing_ceilings(CEILING_NAMES, remeasure=True) == CEILING_NAMES
    assert missing_ceilings([]) == CEILING_NAMES


def test_only_the_named_ceilings_are_measured_again():
    peaks = ("tc_peak_bf16", "tc_peak_fp16")
    assert missing_ceilings(CEILING_NAMES, remeasure=True, only=peaks) == peaks
    assert missing_ceilings(CEILING_NAMES, only=peaks) == ()
    assert missing_ceilings(("fma_peak",), only=("fma_peak", "sgemm")) == ("sgemm",)


def test_baselines_check_with_their_dtypes_tolerance():
    from autotune.model.precision import PRECISIONS
    from autotune.model.problem import ConvProblem, GemmProblem

    for dtype, precision in PRECISIONS.items():
        problem = ConvProblem(N=13, K=3, C=64, F=64, dtype=dtype, layout="NHWC")
        assert baseline_tolerance(problem) == precision.tolerance
    assert baseline_tolerance(GemmProblem(64, 64, 64)) == 1e-5


class _Store:
    def __init__(self, names):
        self.rows = {name: 1.0 for name in names}

    def ceilings(self, device):
        return {"name": list(self.rows)}

    def record_ceiling(self, device_id, name, value, unit, detail, samples):
        self.rows[name] = value


class _Compiler:
    """Compiles nothing: each cubin names its source and defines; the target is a real
    Compiler's for the arch."""

    def __init__(self, arch: str = "sm_90") -> None:
        from autotune.gpu.compiler import Compiler

        self.arch = arch
        self.target = Compiler(arch=arch).target
        self.compiled: list[tuple[str, tuple, bool]] = []

    def compile_source(self, path, defines, arch_specific=False):
        from types import SimpleNamespace

        self.compiled.append((path.name, tuple(defines), arch_specific))
        return SimpleNamespace(cubin=f"{path.name} {dict(defines)}".encode())


def _evaluator(with_torch: bool, capability: str = "9.0"):
    """Answers MeasureCeilings as the worker does: a tensor-core peak is measured where its
    wgmma cubin came on a 9.0 device, or else through PyTorch where that is importable."""
    from types import SimpleNamespace

    from autotune.gpu.library_tasks import TENSOR_CORE_CEILINGS, Ceiling

    class Evaluator:
        device = SimpleNamespace(name="Fake GPU", compute_capability=capability)

        def __init__(self) -> None:
            self.tasks = []

        @property
        def asked(self) -> list[tuple[str, ...]]:
            return [task.names for task in self.tasks]

        def call(self, task, timeout_s):
            self.tasks.append(task)
            own = task.wgmma_cubins if capability == "9.0" else {}
            return [
                Ceiling(name, 1.0, "GFlop/s", "fake", (1.0,))
                for name in task.names
                if name not in TENSOR_CORE_CEILINGS
                or TENSOR_CORE_CEILINGS[name] in own
                or with_torch
            ]

    return Evaluator()


def test_ensure_ceilings_measures_only_what_the_device_lacks():
    from autotune.tuning.baselines import ensure_ceilings

    store, evaluator = _Store(["fma_peak", "copy_bandwidth", "sgemm"]), _evaluator(True)
    said = []
    result = ensure_ceilings(evaluator, _Compiler(), store, 1, None, say=said.append)
    assert evaluator.asked == [("tc_peak_tf32", "tc_peak_bf16", "tc_peak_fp16")]
    assert [c.name for c in result] == list(evaluator.asked[0]) and not said
    assert ensure_ceilings(evaluator, _Compiler(), store, 1, None, say=said.append) is None


def test_on_sm90_each_tensor_core_ceiling_asked_gets_its_wgmma_cubin():
    from autotune.tuning.baselines import ensure_ceilings

    store, evaluator, compiler = _Store([]), _evaluator(False), _Compiler("sm_90")
    ensure_ceilings(evaluator, compiler, store, 1, None, only=("fma_peak", "tc_peak_bf16"))
    (task,) = evaluator.tasks
    assert task.fma_cubin == b"ceiling_fma.cu {}"
    assert task.wgmma_cubins == {"bf16": b"ceiling_wgmma.cu {'STORAGE': 2}"}
    assert ("ceiling_wgmma.cu", (("STORAGE", 2),), True) in compiler.compiled
    ensure_ceilings(evaluator, compiler, store, 1, None, remeasure=True)
    cubins = evaluator.tasks[-1].wgmma_cubins
    assert {dtype: cubin.decode() for dtype, cubin in cubins.items()} == {
        "tf32": "ceiling_wgmma.cu {'STORAGE': 0}",
        "bf16": "ceiling_wgmma.cu {'STORAGE': 2}",
        "fp16": "ceiling_wgmma.cu {'STORAGE': 1}",
    }
    # Nothing of wgmma's for the FP32 ceilings alone.
    ensure_ceilings(evaluator, compiler, store, 1, None, remeasure=True, only=("sgemm",))
    assert evaluator.tasks[-1].wgmma_cubins == {}


def test_on_sm90_the_tensor_core_ceilings_need_no_pytorch():
    from autotune.tuning.baselines import ensure_ceilings

    store, evaluator = _Store([]), _evaluator(False)
    said = []
    result = ensure_ceilings(evaluator, _Compiler("sm_90"), store, 1, None, say=said.append)
    assert [c.name for c in result] == list(CEILING_NAMES) and not said
    assert set(store.rows) == set(CEILING_NAMES)


def test_elsewhere_without_pytorch_the_tensor_core_ceilings_are_said_to_be_missing():
    from autotune.tuning.baselines import ensure_ceilings

    store, evaluator, compiler = _Store([]), _evaluator(False, "8.0"), _Compiler("sm_80")
    said = []
    result = ensure_ceilings(evaluator, compiler, store, 1, None, say=said.append)
    assert evaluator.tasks[0].wgmma_cubins == {}  # no wgmma off sm_90: nothing compiled for it
    assert [name for name, _, _ in compiler.compiled] == ["ceiling_fma.cu"]
    assert [c.name for c in result] == ["fma_peak", "copy_bandwidth", "sgemm"]
    assert len(said) == 1 and "PyTorch" in said[0] and "tc_peak_bf16" in said[0]
    assert set(store.rows) == {"fma_peak", "copy_bandwidth", "sgemm"}
