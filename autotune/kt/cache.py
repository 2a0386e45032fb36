"""Kernel Tuner's results as recordings: its cache files (JSON, gzip'd or not) and T4 results
files read into recorded studies, and a recorded study written back as a cache file for Kernel
Tuner's simulation mode."""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from collections.abc import Mapping
from pathlib import Path

from autotune.model.problem import ProblemError, RecordedProblem
from autotune.model.records import Status
from autotune.model.space import Config, SpaceError
from autotune.replay.recorded import tunables_of
from autotune.replay.recording import Outcome, RecordedStudy, RecordingError

# Kernel Tuner writes a failed configuration's time as the name of its error class.
FAILURES = {
    "CompilationFailedConfig": Status.COMPILE_ERROR,
    "RuntimeFailedConfig": Status.LAUNCH_ERROR,
    "InvalidConfig": Status.RESOURCES,  # refused by a restriction or a device limit at run time
    "ErrorConfig": Status.CRASH,
}
KT_ERROR = {status: name for name, status in FAILURES.items()}


class ErrorConfig(str):
    """A failed configuration's "time", as Kernel Tuner writes it: its error class's name."""

    def __new__(cls) -> ErrorConfig:
        return super().__new__(cls, cls.__name__)


class InvalidConfig(ErrorConfig):
    pass


class CompilationFailedConfig(ErrorConfig):
    pass


class RuntimeFailedConfig(ErrorConfig):
    pass


class VerificationFailedConfig(ErrorConfig):
    """Kernel Tuner stops the whole run on a wrong result; autotune records it and goes on."""


# tune_kernel's results: a failed configuration's "time" (any failure not named here is a
# RuntimeFailedConfig, as Kernel Tuner has it).
FAILED = {
    Status.COMPILE_ERROR: CompilationFailedConfig,
    Status.RESOURCES: InvalidConfig,
    Status.WRONG_RESULT: VerificationFailedConfig,
}

# T4's "invalidity" of a configuration that did not run correctly.
T4_FAILURES = {
    "compile": Status.COMPILE_ERROR,
    "runtime": Status.LAUNCH_ERROR,
    "constraints": Status.RESOURCES,
    "correctness": Status.WRONG_RESULT,
}
T4_UNITS = {"miliseconds": 1.0, "milliseconds": 1.0, "ms": 1.0, "seconds": 1e3, "s": 1e3}
# Kernel Tuner < 0.4 stored a failure as a time of 1e20: no real kernel takes that long.
FAILED_TIME = 1e20
# Compute capabilities of the GPUs the published caches were measured on (the recording's arch;
# nothing is compiled for it, it only names the device class).
ARCHS = (
    ("A100", "sm_80"),
    ("H100", "sm_90"),
    ("A4000", "sm_86"),
    ("A6000", "sm_86"),
    ("RTX 30", "sm_86"),
    ("RTX 20", "sm_75"),
    ("TITAN RTX", "sm_75"),
)


class KtCacheError(RecordingError):
    """A file that is not a readable Kernel Tuner cache or T4 results file."""


def read_json(path: str | Path) -> object:
    """The file's JSON (gzip'd or not). A cache Kernel Tuner left open (its run stopped before
    closing it) is closed the way Kernel Tuner closes it."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KtCacheError(f"{path}: no such file") from None
    except OSError as err:
        raise KtCacheError(f"{path}: cannot be read ({err.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise KtCacheError(f"{path}: a broken gzip file ({err})") from None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise KtCacheError(f"{path}: not a text (JSON) file") from None
    try:
        return json.loads(text)
    except RecursionError:  # Python's parser recurses once per level of nesting
        raise KtCacheError(f"{path}: not a Kernel Tuner file (JSON nested too deeply)") from None
    except json.JSONDecodeError as err:
        stripped = text.rstrip()
        if stripped.endswith(","):
            try:
                return json.loads(stripped[:-1] + "}\n}")
            except json.JSONDecodeError:
                pass
        raise KtCacheError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None


def read_kt_file(
    path: str | Path, family: str | None = None, device: str | None = None
) -> RecordedStudy:
    """One Kernel Tuner cache file or T4 results file as a recorded study. The family defaults
    to the kernel's name (T4 files name none: the parent directory's), the device to the one
    the file names (T4: the file name without _T4)."""
    path = Path(path)
    data = read_json(path)
    try:
        if isinstance(data, Mapping) and "cache" in data and "tune_params" in data:
            return _from_cache(data, path, family, device)
        if isinstance(data, Mapping) and isinstance(data.get("results"), list):
            return _from_t4(data, path, family, device)
    except (ProblemError, SpaceError) as err:
        raise KtCacheError(f"{path}: {err}") from None
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise KtCacheError(f"{path}: malformed entry ({type(err).__name__}: {err})") from None
    raise KtCacheError(
        f"{path}: neither a Kernel Tuner cache file ('tune_params' and 'cache') nor a T4 "
        "results file ('results')"
    )


def _from_cache(data: Mapping, path: Path, family: str | None, device: str | None):
    params = data["tune_params"]
    if not isinstance(params, Mapping) or not params:
        raise KtCacheError(f"{path}: 'tune_params' is not a table of value lists")
    keys = list(data.get("tune_params_keys") or params)
    if set(keys) != set(params):
        raise KtCacheError(f"{path}: 'tune_params_keys' and 'tune_params' name other parameters")
    tunables = [(k, list(params[k])) for k in keys]
    allowed = {k: set(map(_hashable, params[k])) for k in keys}
    entries = data["cache"]
    if not isinstance(entries, Mapping):
        raise KtCacheError(f"{path}: 'cache' is not a table of configurations")
    outcomes: dict[Config, Outcome] = {}
    for entry in entries.values():
        values = {}
        for k in keys:
            if k not in entry:
                raise KtCacheError(f"{path}: a configuration lacks parameter {k!r}")
            if _hashable(entry[k]) not in allowed[k]:
                raise KtCacheError(f"{path}: {k}={entry[k]!r} is not among its tune_params")
            values[k] = entry[k]
        outcomes[Config.of(values)] = _outcome(entry.get("time"), path)
    if not outcomes:
        raise KtCacheError(f"{path}: the cache holds no configuration")
    name = str(data.get("kernel_name") or path.name.split(".")[0])
    return RecordedStudy(
        family=family or name,
        problem=_problem(data.get("problem_size"), path),
        device=device or str(data.get("device_name") or "") or _stem(path),
        arch=_arch(device or str(data.get("device_name") or "")),
        nvrtc="",
        outcomes=outcomes,
        tunables=tunables,
        restrictions=tuple(str(r) for r in data.get("restrictions") or ()),
    )


def _from_t4(data: Mapping, path: Path, family: str | None, device: str | None):
    unit = str((data.get("metadata") or {}).get("timeunit", "milliseconds")).lower()
    if unit not in T4_UNITS:
        raise KtCacheError(f"{path}: unknown time unit {unit!r}")
    order: dict[str, None] = {}
    outcomes: dict[Config, Outcome] = {}
    for result in data["results"]:
        values = dict(result["configuration"])
        order.update(dict.fromkeys(values))
        invalid = result.get("invalidity", "correct")
        if invalid == "correct":
            objective = (result.get("objectives") or ["time"])[0]
            found = [m["value"] for m in result.get("measurements", []) if m["name"] == objective]
            if not found:
                raise KtCacheError(f"{path}: a correct configuration has no {objective!r}")
            outcome = _outcome(found[0] * T4_UNITS[unit] if _number(found[0]) else found[0], path)
        elif invalid in T4_FAILURES:
            outcome = Outcome(T4_FAILURES[invalid], None, f"T4 invalidity: {invalid}")
        else:
            raise KtCacheError(f"{path}: unknown invalidity {invalid!r}")
        outcomes[Config.of(values)] = outcome
    if not outcomes:
        raise KtCacheError(f"{path}: the file holds no result")
    by_name = dict(tunables_of(outcomes))
    return RecordedStudy(
        family=family or path.resolve().parent.name,
        problem=RecordedProblem(1),  # T4 files do not give the problem size
        device=device or _stem(path).removesuffix("_T4"),
        arch=_arch(device or _stem(path)),
        outcomes=outcomes,
        tunables=[(k, by_name[k]) for k in order],
    )


def _outcome(time: object, path: Path) -> Outcome:
    if isinstance(time, str):
        if time not in FAILURES:
            raise KtCacheError(f"{path}: unknown failure {time!r}")
        return Outcome(FAILURES[time], None, f"Kernel Tuner: {time}")
    if not _number(time):
        raise KtCacheError(f"{path}: a configuration's time is {time!r}, not a number")
    if not math.isfinite(time) or time >= FAILED_TIME or time <= 0:
        return Outcome(Status.LAUNCH_ERROR, None, f"Kernel Tuner: failed (time {time})")
    return Outcome(Status.OK, float(time))


def _problem(size: object, path: Path) -> RecordedProblem:
    if size is None:
        return RecordedProblem(1)
    sizes = [size] if not isinstance(size, list | tuple) else list(size)
    if not 1 <= len(sizes) <= 3 or not all(isinstance(s, int) for s in sizes):
        raise KtCacheError(f"{path}: problem_size {size!r} is not one to three integers")
    return RecordedProblem(*sizes)


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _hashable(x: object) -> object:
    return tuple(x) if isinstance(x, list) else x


def _stem(path: Path) -> str:
    return path.name.split(".")[0]


def _arch(device: str) -> str:
    upper = device.upper()
    return next((arch for part, arch in ARCHS if part.upper() in upper), "")


# ---------------------------------------------------------------------------------------------
# Back to Kernel Tuner (its simulation mode reads a cache file)


def kt_problem_size(problem) -> list[int]:
    """Kernel Tuner's problem_size of a recorded problem (1 for a problem of our own kinds: the
    simulation only checks that the file and the call agree)."""
    if problem.kind != "recorded":
        return [1]
    sizes = [problem.X, problem.Y, problem.Z]
    while len(sizes) > 1 and sizes[-1] == 1:
        sizes.pop()
    return sizes


def kt_cache(
    study: RecordedStudy, tunables: list | None = None, kernel_name: str = "kernel"
) -> dict:
    """The study as a Kernel Tuner cache (time in ms; a failure as its Kernel Tuner error), keyed
    the way Kernel Tuner looks configurations up: values joined by commas in parameter order.
    `tunables` (name, values) pairs default to the study's own."""
    tunables = tunables or study.tunables
    keys = [name for name, _ in tunables]
    cache = {}
    for config, o in study.outcomes.items():
        values = config.as_dict()
        entry = {k: values[k] for k in keys}
        timed = o.status in (Status.OK, Status.SLOW) and o.time_ms is not None
        entry["time"] = o.time_ms if timed else KT_ERROR.get(o.status, "RuntimeFailedConfig")
        cache[",".join(str(values[k]) for k in keys)] = entry
    return {
        "device_name": study.device,
        "kernel_name": kernel_name,
        "problem_size": kt_problem_size(study.problem),
        "tune_params_keys": keys,
        "tune_params": {k: list(v) for k, v in tunables},
        "objective": "time",
        "cache": cache,
    }


def slug(text: str) -> str:
    """A file-name-safe form of a device or family name."""
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "unnamed"


__all__ = [
    "FAILED",
    "FAILURES",
    "CompilationFailedConfig",
    "ErrorConfig",
    "InvalidConfig",
    "RuntimeFailedConfig",
    "VerificationFailedConfig",
    "KtCacheError",
    "kt_cache",
    "kt_problem_size",
    "read_json",
    "read_kt_file",
    "slug",
]
