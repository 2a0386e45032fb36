"""Stored measurements as Kernel Tuner's T4 results files, with a cache file for its simulation."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from autotune import __version__
from autotune.export.plans import ExportError, asked_families, choose_device, described
from autotune.families import Family
from autotune.kt.cache import KT_ERROR, slug
from autotune.model.problem import Problem
from autotune.model.records import Status
from autotune.store import Store

T4_VERSION = "1.0.0"  # the T4 results and metadata schemas Kernel Tuner 1.5.0 writes and ships
OBJECTIVE = "time"
# DESIGN's outcomes as T4's "invalidity". SLOW ones were timed (stopped early): correct.
INVALIDITY = {
    Status.OK: "correct",
    Status.SLOW: "correct",
    Status.COMPILE_ERROR: "compile",
    Status.RESOURCES: "constraints",
    Status.LAUNCH_ERROR: "runtime",
    Status.CRASH: "runtime",
    Status.WRONG_RESULT: "correctness",
    Status.TIMEOUT: "timeout",
}


def t4_results(study: pd.DataFrame) -> dict[str, object]:
    """One study's evaluations (rows of Store.history, in order) as a T4 results document."""
    results = []
    for r in study.itertuples(index=False):
        status = Status(r.status)
        timed = status in (Status.OK, Status.SLOW) and _finite(r.time_ms)
        times: dict[str, object] = {"runtimes": [float(t) for t in (r.samples_ms or [])]}
        if _finite(r.compile_s):
            times["compilation"] = float(r.compile_s)
        measurements: list[dict[str, object]] = []
        if timed:
            measurements.append({"name": OBJECTIVE, "value": float(r.time_ms), "unit": "ms"})
            for name, unit in (("gflops", "GFLOP/s"), ("spread", "")):
                value = getattr(r, name)
                if _finite(value):
                    measurements.append({"name": name, "value": float(value), "unit": unit})
        for name, unit in (("registers", ""), ("smem_bytes", "B"), ("scratch_bytes", "B")):
            value = getattr(r, name)
            if _finite(value):
                measurements.append({"name": name, "value": int(value), "unit": unit})
        if r.error:
            measurements.append({"name": "error", "value": str(r.error), "unit": ""})
        results.append(
            {
                "timestamp": pd.Timestamp(r.created_at).isoformat(),
                "configuration": _config(r.config),
                "times": times,
                "invalidity": INVALIDITY[status],
                "correctness": 1 if timed or status is Status.SLOW else 0,
                "measurements": measurements,
                "objectives": [OBJECTIVE],
            }
        )
    return {
        "schema_version": T4_VERSION,
        "results": results,
        "metadata": {"timeunit": "milliseconds"},
    }


def kt_cache_file(study: pd.DataFrame, kernel_name: str) -> dict:
    """The study as a Kernel Tuner cache, as its simulation mode reads one: per configuration its
    fastest OK time (as `best` reads the store), else its last failure as Kernel Tuner's error.
    tune_params hold the stored values only: a study measures part of its space, so a strategy
    run on this file must be restricted to the configurations it holds (Kernel Tuner's
    simulation refuses one that passes its restrictions and is not in the file)."""
    configs = [_config(c) for c in study["config"]]
    keys = list(dict.fromkeys(k for c in configs for k in c))
    tune_params = {k: _sorted(dict.fromkeys(c.get(k) for c in configs)) for k in keys}
    cache: dict[str, dict[str, object]] = {}
    for c, r in zip(configs, study.itertuples(index=False), strict=True):
        key = ",".join(str(c.get(k)) for k in keys)
        status = Status(r.status)
        ok = status is Status.OK and _finite(r.time_ms)
        entry = {**{k: c.get(k) for k in keys}}
        entry[OBJECTIVE] = float(r.time_ms) if ok else KT_ERROR.get(status, "RuntimeFailedConfig")
        held = cache.get(key)
        if held is not None and isinstance(held[OBJECTIVE], float):
            if not ok or held[OBJECTIVE] <= entry[OBJECTIVE]:
                continue
        cache[key] = entry
    return {
        "device_name": str(study["device"].iloc[0]),
        "kernel_name": kernel_name,
        "problem_size": [1],  # our problems are not Kernel Tuner's; the key is in the path
        "tune_params_keys": keys,
        "tune_params": tune_params,
        "objective": OBJECTIVE,
        "cache": cache,
    }


def t4_metadata(device: Mapping[str, object]) -> dict[str, object]:
    """A T4 metadata document for the device the measurements were made on."""
    hardware = described(device)
    return {
        "schema_version": T4_VERSION,
        "metadata": {
            "hardware": {"hardware_description": [hardware]},
            "environment": {
                "device_query": {"autotune": hardware},
                "requirements": [f"autotune=={__version__}"],
            },
        },
    }


def write_t4(
    store: Store,
    output: Path,
    device: str | None = None,
    families: Iterable[str] = (),
    problems: Iterable[Problem] = (),
    registry: Mapping[str, Family] | None = None,
) -> int:
    """Per study (device, family, shape) of the store's timing protocol:
    <output>/<shape>/<family>/<device>_T4.json (T4 results: every evaluation) and
    <device>_cache.json beside it (Kernel Tuner's cache, for its simulation mode), and
    <output>/<device>_metadata_T4.json. The number of T4 results files written."""
    row = choose_device(store, device)
    name = str(row["name"])
    wanted = asked_families(families, registry)
    keys = {p.key for p in problems}
    history = store.history(device=name)
    if wanted:
        history = history[history["family"].isin(wanted)]
    if keys:
        history = history[history["problem_key"].isin(keys)]
    if history.empty:
        raise ExportError(
            f"no evaluations of timing protocol {store.protocol} to export for {name}"
        )
    output.mkdir(parents=True, exist_ok=True)
    device_slug = slug(name)
    (output / f"{device_slug}_metadata_T4.json").write_text(json.dumps(t4_metadata(row), indent=1))
    written = 0
    for (family_name, key), study in history.groupby(["family", "problem_key"], sort=True):
        folder = output / slug(str(key)) / slug(str(family_name))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{device_slug}_T4.json").write_text(json.dumps(t4_results(study)))
        cache = kt_cache_file(study, str(family_name))
        (folder / f"{device_slug}_cache.json").write_text(json.dumps(cache))
        written += 1
    return written


def _config(raw: object) -> dict[str, object]:
    return json.loads(raw) if isinstance(raw, str) else dict(raw)  # type: ignore[call-overload]


def _sorted(values: Iterable[object]) -> list[object]:
    values = list(values)
    try:
        return sorted(values)  # type: ignore[type-var]
    except TypeError:  # values of mixed types keep their stored order
        return values


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
