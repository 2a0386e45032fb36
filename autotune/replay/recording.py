"""Recordings: gzip'd JSON-lines exports of studies' evaluations, read and written."""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autotune.families import UnknownFamily, get_family
from autotune.model.parsing import problem_from_dict
from autotune.model.problem import Problem
from autotune.model.records import TIMING_PROTOCOL, Status
from autotune.model.space import (
    ARCH_LIMITS,
    BoundSpace,
    Config,
    DeviceLimits,
)
from autotune.replay.subspaces import pinned_values, restrict
from autotune.store import Store

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass

FORMAT = "autotune-recording/1"
ERROR_CHARS = 200  # a recorded failure keeps the first line of its error, cut to this


class RecordingError(ValueError):
    """A recording that cannot be read, or that lacks what a replay asks of it."""


class MalformedRecording(RecordingError):
    """A file that is not a recording, or holds values of the wrong types: bad input."""


# ---------------------------------------------------------------------------------------------
# Recorded studies


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Status
    time_ms: float | None
    error: str = ""


@dataclass
class RecordedStudy:
    """Every recorded outcome of one (device, family, problem), with the subspace it covers."""

    family: str
    problem: Problem
    device: str
    arch: str = "sm_90"
    nvrtc: str = ""
    pins: dict[str, tuple] = field(default_factory=dict)
    outcomes: dict[Config, Outcome] = field(default_factory=dict)
    # The timing protocol of its times (DESIGN section 2); a file written before protocols were
    # numbered holds protocol 1 measurements (load_recording says so).
    protocol: int = TIMING_PROTOCOL
    # A space recorded elsewhere (problem kind "recorded"): its parameters in the file's order,
    # and the restrictions the file names, kept as text; its configurations are the space.
    tunables: list[tuple[str, list]] = field(default_factory=list)
    restrictions: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.family} {self.problem.key}"

    @property
    def limits(self) -> DeviceLimits:
        return ARCH_LIMITS.get(self.arch, DeviceLimits())

    def space(self) -> BoundSpace:
        """The (sub)space the recording was made over, bound to its problem and device."""
        if self.problem.kind == "recorded":
            from autotune.replay.recorded import ListedSpace

            return ListedSpace(self.family, self.tunables, self.outcomes)
        searched = restrict(get_family(self.family).load_space(), self.pins)
        return searched.bind(get_family(self.family).space_fields(self.problem), self.limits)

    def missing(self, space: BoundSpace | None = None) -> int:
        """How many valid configs of the space have no recorded outcome."""
        space = space or self.space()
        return sum(c not in self.outcomes for c in space.configs)

    def exhaustive(self, space: BoundSpace | None = None) -> bool:
        return self.missing(space) == 0

    def optimum_ms(self) -> float | None:
        """The fastest OK time (a config stopped early as slower never is the optimum)."""
        times = [o.time_ms for o in self.outcomes.values() if o.status is Status.OK]
        return min(times) if times else None


def predating_completed(study: RecordedStudy) -> RecordedStudy:
    """A study recorded before its family gained a later tunable, read as a study of the space
    with it: configs completed with the value its kernels ran with, and pinned to that value."""
    try:
        family = get_family(study.family)
    except UnknownFamily:
        return study  # an unknown family is reported where its space is needed
    missing = {
        name: value
        for name, value in family.later_tunables.items()
        if any(name not in c.as_dict() for c in study.outcomes)
    }
    if missing:
        study.outcomes = {family.complete(c): o for c, o in study.outcomes.items()}
        study.pins = {**{k: (v,) for k, v in missing.items()}, **study.pins}
    return study


def save_recording(studies: list[RecordedStudy], path: str | Path) -> Path:
    """Write studies as gzip'd JSON lines: a header line per study, then one line per outcome."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same recording gives the same bytes, so a re-export is no git change.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write((json.dumps({"format": FORMAT}) + "\n").encode())
        for i, s in enumerate(studies):
            space = s.space()
            header = {
                "study": i,
                "family": s.family,
                "kind": s.problem.kind,
                "problem": s.problem.as_dict(),
                "device": s.device,
                "arch": s.arch,
                "nvrtc": s.nvrtc,
                "protocol": s.protocol,
                "pins": {k: list(v) for k, v in sorted(s.pins.items())},
                "valid_configs": len(space),
                "recorded": len(s.outcomes),
                "exhaustive": s.exhaustive(space),
            }
            if s.problem.kind == "recorded":  # a list of pairs: the parameters' order is kept
                header["tunables"] = [[name, list(values)] for name, values in s.tunables]
                header["restrictions"] = list(s.restrictions)
            gz.write((json.dumps(header, sort_keys=True) + "\n").encode())
            for config, o in sorted(s.outcomes.items(), key=lambda kv: kv[0].to_json()):
                line = {"s": i, "c": config.as_dict(), "st": o.status.value, "t": o.time_ms}
                if o.error:
                    line["e"] = o.error
                gz.write((json.dumps(line, separators=(",", ":")) + "\n").encode())
    return path


def load_recording(path: str | Path) -> list[RecordedStudy]:
    path = Path(path)
    try:
        with gzip.open(path, "rt") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise MalformedRecording(f"recording {str(path)!r} does not exist") from None
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise MalformedRecording(
            f"recording {str(path)!r} is not a gzip'd JSON-lines file: {err}"
        ) from None
    try:
        rows = [json.loads(line) for line in lines if line.strip()]
    except json.JSONDecodeError as err:
        raise MalformedRecording(f"recording {str(path)!r}: malformed line ({err})") from None
    except RecursionError:  # json recurses once per level of nesting
        raise MalformedRecording(f"recording {str(path)!r}: a line nested too deeply") from None
    if not rows or not isinstance(rows[0], dict) or rows[0].get("format") != FORMAT:
        raise MalformedRecording(f"recording {str(path)!r} is not in format {FORMAT}")
    studies: dict[int, RecordedStudy] = {}
    try:
        for row in rows[1:]:
            if not isinstance(row, dict):
                raise ValueError(f"a line is {type(row).__name__}, not an object")
            if "study" in row:
                studies[row["study"]] = RecordedStudy(
                    family=_typed(row["family"], str, "family"),
                    problem=problem_from_dict(row["problem"], row["kind"]),
                    device=_typed(row["device"], str, "device"),
                    arch=_arch(row.get("arch", "sm_90")),
                    nvrtc=_typed(row.get("nvrtc", ""), str, "nvrtc"),
                    pins=pinned_values(_typed(row.get("pins", {}), dict, "pins")),
                    protocol=_protocol(row.get("protocol", 1)),
                    tunables=[
                        (_typed(name, str, "tunable"), list(_typed(values, list, "values")))
                        for name, values in _typed(row.get("tunables", []), list, "tunables")
                    ],
                    restrictions=tuple(
                        _typed(r, str, "restriction")
                        for r in _typed(row.get("restrictions", []), list, "restrictions")
                    ),
                )
            else:
                time_ms = row["t"]
                if time_ms is not None and not _finite_number(time_ms):
                    raise ValueError(f"time {time_ms!r} is not a number")
                config = _typed(row["c"], dict, "config")
                pinned_values(config)  # a config's values are plain values too
                studies[row["s"]].outcomes[Config.of(config)] = Outcome(
                    Status(row["st"]), time_ms, _typed(row.get("e", ""), str, "error")
                )
    except (KeyError, TypeError, ValueError) as err:
        raise MalformedRecording(f"recording {str(path)!r}: malformed entry ({err})") from None
    return [predating_completed(s) for s in studies.values()]


def _arch(value: object) -> str:
    """A GPU architecture as NVRTC names it (sm_90): the replay derives the compute capability
    from its digits."""
    if not isinstance(value, str) or not re.fullmatch(r"(sm_\d{2,3}[a-z]?)?", value):
        raise ValueError(f"arch must name an architecture like sm_90 (or be empty), not {value!r}")
    return value


def _typed(value: object, kind: type, what: str):
    if not isinstance(value, kind):
        raise ValueError(f"{what} must be a {kind.__name__}, not {value!r}")
    return value


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def load_recordings(paths: Iterable[str | Path]) -> list[RecordedStudy]:
    """Every study of every file (a directory stands for its *.jsonl.gz files)."""
    out: list[RecordedStudy] = []
    for p in paths:
        p = Path(p)
        files = sorted(p.glob("*.jsonl.gz")) if p.is_dir() else [p]
        for f in files:
            out += load_recording(f)
    return out


# ---------------------------------------------------------------------------------------------
# Export from a results database


def export_studies(
    store: Store,
    device: str | None = None,
    families: Iterable[str] = (),
    problem_keys: Iterable[str] = (),
    pins: Mapping[str, Mapping[str, tuple]] | None = None,
    protocol: int = TIMING_PROTOCOL,
) -> list[RecordedStudy]:
    """The stored studies measured under one timing protocol (filtered by device, family and
    problem key) as recordings. A family with pins keeps only the evaluations inside its
    subspace."""
    families, problem_keys, pins = set(families), set(problem_keys), pins or {}
    devices = store.devices()
    arch = {
        row["name"]: "sm_" + str(row["compute_capability"]).replace(".", "")
        for _, row in devices.iterrows()
    }
    nvrtc = {row["name"]: str(row["nvrtc_version"]) for _, row in devices.iterrows()}
    history = store.history(device=device, protocol=protocol)
    studies: dict[tuple, RecordedStudy] = {}
    for row in history.itertuples(index=False):
        if families and row.family not in families:
            continue
        if problem_keys and row.problem_key not in problem_keys:
            continue
        key = (row.device, row.family, row.problem_key)
        if key not in studies:
            studies[key] = RecordedStudy(
                family=row.family,
                problem=problem_from_dict(_shape(row.shape), row.kind),
                device=row.device,
                arch=arch.get(row.device, "sm_90"),
                nvrtc=nvrtc.get(row.device, ""),
                pins=dict(pins.get(row.family, {})),
                protocol=protocol,
            )
        status = Status(row.status)
        error = (row.error or "").strip().splitlines()[0][:ERROR_CHARS] if row.error else ""
        time_ms = float(row.time_ms) if timed(status) and row.time_ms is not None else None
        studies[key].outcomes[Config.from_json(row.config)] = Outcome(status, time_ms, error)
    out = [predating_completed(s) for s in studies.values()]
    for s in out:
        if s.pins:
            space = s.space()
            s.outcomes = {c: o for c, o in s.outcomes.items() if space.is_valid(c)}
    return [s for s in out if s.outcomes]


def timed(status: Status) -> bool:
    """Checked and timed: OK, or stopped early as slower with a pessimistic time (SLOW)."""
    return bool(getattr(status, "timed", status.ok))


def _protocol(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"protocol {value!r} is not a protocol number")
    return value


def _shape(shape: object) -> dict:
    return json.loads(shape) if isinstance(shape, str) else dict(shape)  # type: ignore[arg-type]


__all__ = [
    "FORMAT",
    "MalformedRecording",
    "Outcome",
    "RecordedStudy",
    "RecordingError",
    "export_studies",
    "load_recording",
    "load_recordings",
    "save_recording",
    "timed",
]
