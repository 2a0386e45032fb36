"""Kernel Tuner's file helpers on tune_kernel's results without a GPU: NVRTC compiles the kernel
(one configuration fails to), a synthetic evaluator answers for the GPU worker (one answer is
wrong); the T4 files are held to Kernel Tuner's own schemas and read back by our T4 reader."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import autotune
from autotune.kt import api
from autotune.kt.cache import read_kt_file
from autotune.kt.file_utils import machine_metadata, nvml_gpus, t4_from_results
from autotune.model.records import Status
from autotune.model.space import Config
from tests.conftest import SyntheticEvaluator

# Kernel Tuner's README example, with a configuration that does not compile.
VECTOR_ADD = """
#if block_size_x == 512
#error "no 512 here"
#endif
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
TUNE_PARAMS = {"block_size_x": [64, 128, 256, 512]}


@pytest.fixture
def results(compiler, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "CACHE_ROOT", tmp_path / "cache")
    n = 1000
    a = np.linspace(-1, 1, n, dtype=np.float32)
    b = np.ones(n, np.float32)

    def cost(defines):  # 128 answers wrong; 256 is the fastest
        if defines["block_size_x"] == 128:
            return Status.WRONG_RESULT
        return 1.0 + abs(defines["block_size_x"] - 256) / 256

    found, _ = autotune.tune_kernel(
        "vector_add",
        VECTOR_ADD,
        n,
        [np.zeros_like(a), a, b, np.int32(n)],
        TUNE_PARAMS,
        answer=[a + b, None, None, None],
        evaluator=SyntheticEvaluator(cost),
        storage=str(tmp_path / "r.db"),
        compiler_cache=None,
        quiet=True,
    )
    return {r["block_size_x"]: r for r in found}


def _validate(doc: dict, name: str) -> None:
    """Hold the document to Kernel Tuner's own schema where Kernel Tuner is installed (the test
    extra installs it; a GPU machine's wheels may leave it out)."""
    try:
        from kernel_tuner.file_utils import output_file_schema
    except ImportError:
        return
    import jsonschema

    version, schema = output_file_schema(name)
    assert version == "1.0.0"
    jsonschema.validate(doc, schema)


def test_the_results_file_holds_each_outcome_in_kernel_tuners_schema(results, tmp_path) -> None:
    autotune.store_output_file(str(tmp_path / "out" / "vector_add"), results.values(), TUNE_PARAMS)
    doc = json.loads((tmp_path / "out" / "vector_add.json").read_text())  # ".json" added
    _validate(doc, "results")
    by_size = {r["configuration"]["block_size_x"]: r for r in doc["results"]}
    assert {k: r["invalidity"] for k, r in by_size.items()} == {
        64: "correct",
        128: "correctness",
        256: "correct",
        512: "compile",
    }
    assert [by_size[k]["correctness"] for k in (64, 128, 256, 512)] == [1, 0, 1, 0]
    best = by_size[256]
    assert {"name": "time", "value": 1.0, "unit": "ms"} in best["measurements"]
    assert best["times"]["runtimes"] == results[256]["times"]
    assert best["times"]["compilation"] == pytest.approx(results[256]["compile_time"])
    assert best["objectives"] == ["time"] and best["timestamp"] == results[256]["timestamp"]
    failed = {m["name"]: m["value"] for m in by_size[512]["measurements"]}
    assert failed["time"] == "CompilationFailedConfig" and "no 512 here" in failed["error"]
    assert by_size[512]["times"]["runtimes"] == []


def test_our_t4_reader_reads_the_results_file_back(results, tmp_path) -> None:
    path = tmp_path / "vector_add.json"
    autotune.store_output_file(path, list(results.values()), TUNE_PARAMS)
    study = read_kt_file(path, family="vector_add", device="Synthetic GPU")
    best = min(study.outcomes.items(), key=lambda kv: kv[1].time_ms or float("inf"))
    assert best[0] == Config.of({"block_size_x": 256}) and best[1].time_ms == 1.0
    assert study.outcomes[Config.of({"block_size_x": 128})].status is Status.WRONG_RESULT
    assert study.outcomes[Config.of({"block_size_x": 512})].status is Status.COMPILE_ERROR


def test_kernel_tuners_own_results_keep_their_error_classes() -> None:
    # Kernel Tuner's results carry no status: the error under __error__ (or as the time) says.
    class CompilationFailedConfig:  # as kernel_tuner.util names its error classes
        pass

    error = CompilationFailedConfig()
    rows = [
        {"block_size_x": 64, "time": 1.5, "times": [1.5, 1.5]},
        {"block_size_x": 512, "time": error, "__error__": error},
        {"block_size_x": 32, "time": "InvalidConfig"},
    ]
    doc = t4_from_results(rows, {"block_size_x": [32, 64, 512]})
    assert [r["invalidity"] for r in doc["results"]] == ["correct", "compile", "constraints"]
    assert all(m["name"] != "__error__" for r in doc["results"] for m in r["measurements"])


def test_more_than_one_objective_is_refused_in_one_line(results, tmp_path) -> None:
    with pytest.raises(ValueError, match="one objective"):
        autotune.store_output_file(tmp_path / "o", results.values(), TUNE_PARAMS, ["time", "x"])
    assert not (tmp_path / "o.json").exists()


def test_the_metadata_file_describes_this_machine_in_kernel_tuners_schema(tmp_path) -> None:
    autotune.store_metadata_file(tmp_path / "meta" / "vector_add-metadata")
    doc = json.loads((tmp_path / "meta" / "vector_add-metadata.json").read_text())
    _validate(doc, "metadata")
    hardware = doc["metadata"]["hardware"]
    assert hardware["hardware_description"][0]["class"] == "system"
    assert hardware["operating_system"]
    requirements = doc["metadata"]["environment"]["requirements"]
    assert requirements[0] == f"autotune=={autotune.__version__}"
    assert any(r.startswith("numpy==") for r in requirements)
    # Every GPU NVML sees (none on a machine without one) is described, and only those.
    gpus = nvml_gpus()
    assert doc["metadata"]["environment"]["device_query"] == ({"nvml": gpus} if gpus else {})
    assert hardware["hardware_description"][1:] == [{"class": "display", **g} for g in gpus]


def test_each_gpu_is_described_as_nvml_reports_it(monkeypatch) -> None:
    class FakeNvml:  # one H200 as NVML's binding reports it
        NVML_CLOCK_SM = 1

        def nvmlInit(self):
            pass

        def nvmlSystemGetDriverVersion(self):
            return b"580.95.05"

        def nvmlDeviceGetCount(self):
            return 1

        def nvmlDeviceGetHandleByIndex(self, index):
            return ("handle", index)

        def nvmlDeviceGetCudaComputeCapability(self, handle):
            return 9, 0

        def nvmlDeviceGetName(self, handle):
            return "NVIDIA H200"

        def nvmlDeviceGetMemoryInfo(self, handle):
            return SimpleNamespace(total=150_754_820_096)

        def nvmlDeviceGetMaxClockInfo(self, handle, clock):
            return 1980 if clock == self.NVML_CLOCK_SM else 0

        def nvmlDeviceGetPowerManagementLimit(self, handle):
            return 700_000  # mW

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    assert nvml_gpus() == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "compute_capability": "9.0",
            "driver_version": "580.95.05",
            "memory_bytes": 150_754_820_096,
            "max_sm_clock_mhz": 1980,
            "power_limit_w": 700.0,
        }
    ]
    described = machine_metadata()["metadata"]
    assert described["hardware"]["hardware_description"][1]["class"] == "display"
    assert described["environment"]["device_query"]["nvml"][0]["name"] == "NVIDIA H200"


def test_without_nvml_no_gpu_is_described(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # the binding not installed
    assert nvml_gpus() == []
    assert machine_metadata()["metadata"]["environment"]["device_query"] == {}


def test_a_source_tree_not_installed_lists_its_pyprojects_requirements(monkeypatch) -> None:
    # As on a machine that runs the checkout from PYTHONPATH: no distribution's metadata.
    from importlib.metadata import PackageNotFoundError

    from autotune.kt import file_utils

    def missing(name):
        raise PackageNotFoundError(name)

    monkeypatch.setattr(file_utils, "requires", missing)
    listed = file_utils.requirements()
    assert listed[0] == f"autotune=={autotune.__version__}"
    assert any(r.startswith("numpy==") for r in listed)
