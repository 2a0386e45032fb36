"""Recording subspaces: pinned value lists per family cut a family's space to what a recording
covers (the TOML files of `--subspace`, data/recording/)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from autotune import package_path
from autotune.model.space import SearchSpace, SpaceError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SUBSPACE_DIR = package_path("autotune", "data", "recording")


def load_pins(path: str | Path | None) -> dict[str, dict[str, tuple]]:
    """Pins per family from a TOML file: a table per family, each parameter a list of the values
    it keeps (`[chen_general] VEC = [4]`). An empty mapping when path is None."""
    if path is None:
        return {}
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpaceError(f"subspace file {str(path)!r} does not exist") from None
    except UnicodeDecodeError as err:
        raise SpaceError(
            f"subspace file {str(path)!r} is not UTF-8 text (byte {err.start})"
        ) from None
    except OSError as err:
        raise SpaceError(
            f"cannot read subspace file {str(path)!r}: {err.strerror or err}"
        ) from None
    except tomllib.TOMLDecodeError as err:
        raise SpaceError(f"{path}: malformed TOML ({err})") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise SpaceError(f"{path}: malformed TOML (nested too deeply)") from None
    pins: dict[str, dict[str, tuple]] = {}
    for family, table in data.items():
        if family == "description":
            continue
        if not isinstance(table, Mapping):
            raise SpaceError(f"{path.name}: [{family}] must be a table of value lists")
        try:
            pins[family] = pinned_values(table)
        except ValueError as err:
            raise SpaceError(f"{path.name}: [{family}] {err}") from None
    return pins


def pinned_values(table: Mapping) -> dict[str, tuple]:
    """Each parameter's pinned values as a tuple of plain values (a scalar pins one value);
    ValueError for anything else, which could not be compared with a space's values."""
    pins: dict[str, tuple] = {}
    for name, values in table.items():
        values = values if isinstance(values, list) else [values]
        if not all(isinstance(v, int | float | str) for v in values):  # bool is an int
            raise ValueError(f"{name} must be a value or a list of values, not {values!r}")
        pins[name] = tuple(values)
    return pins


def restrict(space: SearchSpace, pins: Mapping[str, Iterable]) -> SearchSpace:
    """The space with each pinned parameter's values cut to the pinned ones (order kept)."""
    if not pins:
        return space
    unknown = set(pins) - set(space.names)
    if unknown:
        raise SpaceError(f"{space.name}: pinned parameter(s) {', '.join(sorted(unknown))} unknown")
    params = []
    for p in space.parameters:
        if p.name in pins:
            keep = set(pins[p.name])
            missing = keep - set(p.values)
            if missing:
                # Sorted by type first: a pin may mix numbers and strings.
                shown = sorted(missing, key=lambda v: (type(v).__name__, v))
                raise SpaceError(f"{space.name}: {p.name} has no value(s) {shown}")
            p = type(p)(p.name, tuple(v for v in p.values if v in keep))
        params.append(p)
    return SearchSpace(space.name, tuple(params), space.constraints, space.defaults)


__all__ = ["SUBSPACE_DIR", "load_pins", "pinned_values", "restrict"]
