"""Shape sets: named sets kept as data, shapes from the command line, CSV and TOML files."""

from __future__ import annotations

import csv
import itertools
import sys
from pathlib import Path

from autotune.problem import (
    Problem,
    ProblemError,
    check_kind,
    guess_kind,
    parse_shape,
    problem_from_dict,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SHAPE_SETS_FILE = Path(__file__).with_name("data") / "shape_sets.toml"


def _load_sets() -> dict[str, dict]:
    try:
        with SHAPE_SETS_FILE.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as err:
        raise ProblemError(f"cannot read the shape sets ({err})") from None
    except tomllib.TOMLDecodeError as err:
        raise ProblemError(f"{SHAPE_SETS_FILE}: malformed TOML ({err})") from None


def shape_set_names() -> list[str]:
    return list(_load_sets())


def describe_shape_sets() -> dict[str, str]:
    return {name: spec.get("description", "") for name, spec in _load_sets().items()}


def shape_set_kinds() -> dict[str, str]:
    """The problem kind of every named set (conv2d unless the set says otherwise)."""
    return {name: spec.get("kind", "conv2d") for name, spec in _load_sets().items()}


def _expand(spec: dict, origin: str) -> list[Problem]:
    """A set's problems; its `kind` names the problem type, or the field names tell it."""
    kind = spec.get("kind")
    if kind is not None:
        try:
            check_kind(kind)
        except ProblemError as err:
            raise ProblemError(f"{origin}: {err}") from None
    if "grid" in spec:
        grid = dict(spec["grid"])
        tied = grid.pop("CF", None)  # C = F, as in Chen et al.'s general-case sweep
        names = list(grid)
        problems = []
        for combo in itertools.product(*(grid[n] for n in names)):
            values = dict(zip(names, combo, strict=True))
            for cf in tied or [None]:
                if cf is not None:
                    values = {**values, "C": cf, "F": cf}
                problems.append(problem_from_dict(values, kind))
        return problems
    if "layers" in spec:
        return [
            problem_from_dict({k: v for k, v in layer.items() if k != "name"}, kind)
            for layer in spec["layers"]
        ]
    raise ProblemError(f"{origin}: a shape set needs 'grid' or 'layers'")


def named_shapes(name: str) -> list[Problem]:
    sets = _load_sets()
    if name not in sets:
        raise ProblemError(f"unknown shape set {name!r} (known: {', '.join(sets)})")
    return _expand(sets[name], name)


def shapes_from_file(path: str | Path) -> list[Problem]:
    """Read shapes from a CSV (header with N,K,C,F[,B,stride], M,N,K or D,R,Cc,Kd,Kr,Kc; the
    header's names give the kind) or TOML file (a 'shapes' list, a 'grid' table or a 'layers'
    list, with an optional top-level `kind`)."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(f"shape file {str(path)!r} does not exist")
    if path.suffix.lower() == ".csv":
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        if not rows:
            raise ProblemError(f"shape file {str(path)!r} has no rows")
        try:
            columns = [k.strip() for k in rows[0] if k and k.strip() != "name"]
            kind = guess_kind(columns)
            return [
                problem_from_dict(
                    {k.strip(): v for k, v in row.items() if k and k.strip() != "name"}, kind
                )
                for row in rows
            ]
        except ProblemError as err:
            raise ProblemError(f"{path}: {err}") from None
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as err:
            raise ProblemError(f"{path}: malformed TOML ({err})") from None
        if "shapes" in data:
            data = {**{k: v for k, v in data.items() if k == "kind"}, "layers": data["shapes"]}
        try:
            return _expand(data, str(path))
        except ProblemError as err:
            raise ProblemError(f"{path}: {err}") from None
    raise ProblemError(f"shape file {str(path)!r} must end in .csv or .toml")


def collect_shapes(
    sets: tuple[str, ...] = (), shapes: tuple[str, ...] = (), files: tuple[str, ...] = ()
) -> list[Problem]:
    """Union of shapes from named sets, --shape strings and files, first occurrence kept."""
    found: list[Problem] = []
    for name in sets:
        found.extend(named_shapes(name))
    for text in shapes:
        found.append(parse_shape(text))
    for path in files:
        found.extend(shapes_from_file(path))
    return list(dict.fromkeys(found))
