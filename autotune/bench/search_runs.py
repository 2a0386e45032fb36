"""The runs file of `autotune bench search --runs`: each run's trajectory appended as a JSON
line when it ends, read back (and checked field by field) to resume or extend a benchmark."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import click

from autotune.bench.scoring import Case
from autotune.model.quoting import one_line, quoted


def save_runs(path: Path, cases: list[Case], top: int, results) -> None:
    """Runs' trajectories appended as JSON lines, the space by name, as each run ends: a long
    benchmark stopped half-way keeps what it did, and a later call adds strategies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "at") as f:  # appended gzip members read back as one stream
        for name, ci, seed, trajectory, spent, asks in results:
            row = {"strategy": name, "space": cases[ci].name, "seed": seed, "top": top}
            row |= {"seconds": spent, "asks": asks, "trajectory": [round(x, 6) for x in trajectory]}
            f.write(json.dumps(row) + "\n")


def load_runs(path: Path, cases: list[Case], top: int) -> list:
    """The runs of `path` on these spaces to this top budget (none if the file is absent)."""
    if not path.exists():
        return []
    index = {c.name: i for i, c in enumerate(cases)}
    out = []
    number = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                number += 1
                r = _run_row(json.loads(line))
                if r["space"] in index and r["top"] == top:
                    out.append(
                        (r["strategy"], index[r["space"]], r["seed"], r["trajectory"])
                        + (r["seconds"], r["asks"])
                    )
    except (OSError, EOFError, ValueError, RecursionError) as err:  # not gzip, not JSON
        raise click.BadParameter(
            f"{quoted(str(path))} is not a runs file: {one_line(err)}", param_hint="--runs"
        ) from None
    except (KeyError, TypeError, AttributeError) as err:
        raise click.BadParameter(
            f"{quoted(str(path))} line {number}: not a run ({type(err).__name__}: "
            f"{quoted(str(err), 40)})",
            param_hint="--runs",
        ) from None
    return out


_RUN_FIELDS = {"strategy": str, "space": str, "seed": int, "top": int, "asks": int}


def _run_row(r: object) -> dict:
    """One line of a runs file, every field of the type save_runs writes, else TypeError."""
    if not isinstance(r, dict):
        raise TypeError(f"a line is {type(r).__name__}, not an object")
    for name, kind in _RUN_FIELDS.items():
        if not isinstance(r[name], kind) or isinstance(r[name], bool):
            raise TypeError(f"{name} is not {kind.__name__}")
    trajectory = r["trajectory"]
    if not isinstance(trajectory, list) or not all(_is_number(x) for x in trajectory):
        raise TypeError("trajectory is not a list of numbers")
    if not _is_number(r["seconds"]):
        raise TypeError("seconds is not a number")
    return r


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


__all__ = ["load_runs", "save_runs"]
