"""Kernel Tuner's file helpers (its kernel_tuner.file_utils) for tune_kernel's results: the
results as a T4 results file and this machine as a T4 metadata file, the schemas Kernel Tuner
1.5.0 ships, so that a script that stores them (Kernel Tuner's README example does) runs on
autotune alone. `from autotune import store_output_file, store_metadata_file`."""

from __future__ import annotations

import json
import math
import os
import platform
import re
import sys
from collections.abc import Iterable, Mapping
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path
from typing import Any

from autotune import __version__
from autotune.kt.cache import FAILURES, VerificationFailedConfig
from autotune.kt.t4 import INVALIDITY, T4_VERSION
from autotune.model.records import Status

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# A result's per-configuration timings (ms, as tune_kernel and Kernel Tuner name them) and T4's
# names for them.
TIMINGS = {
    "compile_time": "compilation",
    "benchmark_time": "benchmark",
    "framework_time": "framework",
    "strategy_time": "search_algorithm",
    "verification_time": "validation",
}
DISTRIBUTION = "autotune-dse"  # the package's name on PyPI
# A result's keys that are neither a tunable nor a measurement.
NOT_MEASURED = frozenset({*TIMINGS, "times", "timestamp", "status", "stored", "__error__"})


def t4_from_results(
    results: Iterable[Mapping[str, Any]], tune_params: Mapping[str, Any], objective: str = "time"
) -> dict[str, Any]:
    """tune_kernel's results as a T4 results document: per configuration its tunables, timings,
    outcome (T4's invalidity, from the result's status) and every other key as a measurement
    (ms where its name starts with "time", as Kernel Tuner writes them)."""
    if not isinstance(objective, str):
        raise ValueError(
            f"a T4 results file holds one objective, given {objective!r}: name one, e.g. 'time'"
        )
    documents = []
    for row in results:
        status = _status(row)
        timed = status in (Status.OK, Status.SLOW)
        times: dict[str, Any] = {
            t4: float(row[k]) for k, t4 in TIMINGS.items() if _finite(row.get(k))
        }
        times["runtimes"] = [float(t) for t in row.get("times", ())] if timed else []
        measurements = [
            {"name": str(k), "value": value, "unit": "ms" if str(k).startswith("time") else ""}
            for k, v in row.items()
            if k not in tune_params and k not in NOT_MEASURED
            for value in (_measured(v),)
            if value is not None
        ]
        document = {
            "configuration": {k: _plain(row[k]) for k in tune_params if k in row},
            "times": times,
            "invalidity": INVALIDITY[status],
            "correctness": 1 if timed else 0,
            "measurements": measurements,
            "objectives": [objective],
        }
        if "timestamp" in row:
            document = {"timestamp": str(row["timestamp"]), **document}
        documents.append(document)
    return {
        "schema_version": T4_VERSION,
        "results": documents,
        "metadata": {"timeunit": "milliseconds"},
    }


def store_output_file(
    output_filename: str | os.PathLike,
    results: Iterable[Mapping[str, Any]],
    tune_params: Mapping[str, Any],
    objective: str = "time",
) -> None:
    """Write tune_kernel's results as a T4 results file (".json" added where the name lacks it,
    its folder made), as Kernel Tuner's store_output_file does."""
    path = _json_path(output_filename)
    path.write_text(json.dumps(t4_from_results(results, tune_params, objective)))


def store_metadata_file(metadata_filename: str | os.PathLike) -> None:
    """Write this machine as a T4 metadata file (".json" added where the name lacks it, its
    folder made), as Kernel Tuner's store_metadata_file does: the host and its GPUs (NVML's
    view: none where NVML is not there) and the installed versions of autotune's requirements."""
    path = _json_path(metadata_filename)
    path.write_text(json.dumps(machine_metadata(), indent=1))


def machine_metadata() -> dict[str, Any]:
    """A T4 metadata document for this machine."""
    gpus = nvml_gpus()
    host = {
        "class": "system",
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }
    return {
        "schema_version": T4_VERSION,
        "metadata": {
            "hardware": {
                "hardware_description": [host, *({"class": "display", **g} for g in gpus)],
                "operating_system": platform.system() or "unidentified",
            },
            "environment": {
                "device_query": {"nvml": gpus} if gpus else {},
                "requirements": requirements(),
            },
        },
    }


def nvml_gpus() -> list[dict[str, Any]]:
    """Each GPU as NVML describes it; none where NVML's binding or driver is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    driver = _text(pynvml.nvmlSystemGetDriverVersion())
    gpus = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        gpus.append(
            {
                "index": index,
                "name": _text(pynvml.nvmlDeviceGetName(handle)),
                "compute_capability": f"{major}.{minor}",
                "driver_version": driver,
                "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                "max_sm_clock_mhz": int(
                    pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
                ),
                "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000,
            }
        )
    return gpus


def requirements() -> list[str]:
    """autotune and those of its requirements (its extras' too) installed here, as
    NAME==VERSION: what is not installed took no part."""
    names = dict.fromkeys(re.match(r"[A-Za-z0-9._-]*", r).group(0) for r in _listed())
    found = [f"autotune=={__version__}"]
    for name in filter(None, names):
        try:
            found.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            pass
    return found


def _listed() -> list[str]:
    """autotune's requirements as its installed distribution lists them, or, for a source tree
    on the path (not installed), as its pyproject.toml does."""
    try:
        return requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if not pyproject.is_file():
        return []
    project = tomllib.loads(pyproject.read_text()).get("project", {})
    extras = project.get("optional-dependencies", {}).values()
    return [*project.get("dependencies", []), *(r for extra in extras for r in extra)]


def _status(row: Mapping[str, Any]) -> Status:
    """The result's outcome: its status (tune_kernel's), else its error or what its time says
    (Kernel Tuner's: a number, or its error class's name)."""
    if "status" in row:
        return Status(row["status"])
    time = row.get("__error__", row.get("time"))
    if _finite(time):
        return Status.OK
    name = type(time).__name__ if not isinstance(time, str) else time
    if name == VerificationFailedConfig.__name__:
        return Status.WRONG_RESULT
    return FAILURES.get(name, Status.CRASH)


def _measured(value: Any) -> Any:
    """A T4 measurement's value (a number, a string or an array), or None for anything else."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return str(value)
    if isinstance(value, list | tuple) and all(_finite(v) for v in value):
        return [float(v) for v in value]
    if hasattr(value, "item"):  # a NumPy scalar
        return _measured(value.item())
    return None


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _finite(value: Any) -> bool:
    if hasattr(value, "item"):
        value = value.item()
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _json_path(name: str | os.PathLike) -> Path:
    path = Path(name)
    if path.suffix != ".json":
        path = path.with_name(path.name + ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
