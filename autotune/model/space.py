"""Search spaces: parameters, constraints over them, enumeration and the Config value."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune.model.expression import Expression, SpaceError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Value = int | float | bool | str

# The partial product held while enumerating: 4x the largest family's (sgemm, 1.04e6), at most
# a few hundred MB of columns. A space without constraints on its first parameters tried 31 GiB.
MAX_ENUMERATED_ROWS = 4_000_000


# ---------------------------------------------------------------------------------------------
# Config


@dataclass(frozen=True, slots=True)
class Config:
    """One point of a search space: parameter names to values, hashable and ordered by name."""

    items: tuple[tuple[str, Value], ...]

    @classmethod
    def of(cls, values: Mapping[str, Value]) -> Config:
        return cls(tuple(sorted((k, _plain(v)) for k, v in values.items())))

    @classmethod
    def from_json(cls, text: str) -> Config:
        return cls.of(json.loads(text))

    def as_dict(self) -> dict[str, Value]:
        return dict(self.items)

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))

    def __getitem__(self, name: str) -> Value:
        for k, v in self.items:
            if k == name:
                return v
        raise KeyError(name)

    def __str__(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.items)


def _plain(value: Any) -> Value:
    """NumPy scalars to Python values, so Configs compare and hash consistently."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool | int | float | str):
        return value
    raise SpaceError(f"parameter value {value!r} is not a number, boolean or string")


# ---------------------------------------------------------------------------------------------
# Device limits (what constraints may name besides parameters and problem fields)


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    MAX_THREADS: int = 1024
    SMEM_PER_BLOCK: int = 48 * 1024  # without the opt-in attribute
    SMEM_PER_BLOCK_OPTIN: int = 227 * 1024
    CONST_BYTES: int = 64 * 1024
    REGS_PER_BLOCK: int = 64 * 1024
    REGS_PER_THREAD: int = 255
    WARP_SIZE: int = 32
    SM_COUNT: int = 132

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


# Limits per architecture, for binding spaces without a GPU (compile-only work, tests).
ARCH_LIMITS = {
    "sm_90": DeviceLimits(),
    "sm_80": DeviceLimits(SMEM_PER_BLOCK_OPTIN=163 * 1024, SM_COUNT=108),
    "sm_89": DeviceLimits(SMEM_PER_BLOCK_OPTIN=99 * 1024, SM_COUNT=128),
}


# ---------------------------------------------------------------------------------------------
# Spaces


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    values: tuple[Value, ...]


@dataclass(frozen=True)
class SearchSpace:
    """Tunable parameters (explicit value lists) and constraints, as read from a TOML file."""

    name: str
    parameters: tuple[Parameter, ...]
    constraints: tuple[Expression, ...] = ()
    defaults: Mapping[str, Value] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def cartesian_size(self) -> int:
        size = 1
        for p in self.parameters:
            size *= len(p.values)
        return size

    @classmethod
    def from_toml(cls, path: str | Path) -> SearchSpace:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise SpaceError(f"search space file {str(path)!r} does not exist") from None
        except tomllib.TOMLDecodeError as err:
            raise SpaceError(f"{path}: malformed TOML ({err})") from None
        except RecursionError:  # tomllib recurses once per level of nesting
            raise SpaceError(f"{path}: malformed TOML (nested too deeply)") from None
        except (OSError, UnicodeDecodeError) as err:
            raise SpaceError(f"cannot read {str(path)!r}: {err}") from None
        try:
            return cls.from_dict(path.stem, data)
        except SpaceError as err:
            raise SpaceError(f"{path.name}: {err}") from None

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> SearchSpace:
        unknown = set(data) - {"parameters", "constraints", "description", "defaults"}
        if unknown:
            raise SpaceError(f"unknown section(s) {', '.join(sorted(unknown))}")
        raw_params = data.get("parameters")
        if not isinstance(raw_params, Mapping) or not raw_params:
            raise SpaceError("a search space needs a non-empty [parameters] table")
        params = []
        for pname, values in raw_params.items():
            if not pname.isidentifier() or pname != pname.upper():
                raise SpaceError(f"parameter {pname!r} must be an UPPER_SNAKE identifier")
            if not isinstance(values, list) or not values:
                raise SpaceError(f"parameter {pname!r} needs a non-empty list of values")
            plain = tuple(_plain(v) for v in values)
            if len(set(plain)) != len(plain):
                raise SpaceError(f"parameter {pname!r} repeats a value")
            params.append(Parameter(pname, plain))
        raw_constraints = data.get("constraints", [])
        if not isinstance(raw_constraints, list):
            raise SpaceError("'constraints' must be a list of strings")
        constraints = tuple(Expression(c) for c in raw_constraints)
        defaults = data.get("defaults", {})
        return cls(name, tuple(params), constraints, defaults)

    def bind(self, problem_fields: Mapping[str, Any], limits: DeviceLimits) -> BoundSpace:
        return BoundSpace(self, {**limits.as_dict(), **problem_fields})


class BoundSpace:
    """A space bound to one problem and one device: its valid configurations, enumerated once."""

    def __init__(self, space: SearchSpace, context: Mapping[str, Any]) -> None:
        self.space = space
        self.context = dict(context)
        clash = set(space.names) & set(self.context)
        if clash:
            raise SpaceError(f"parameter name(s) {', '.join(sorted(clash))} shadow problem fields")
        known = set(space.names) | set(self.context)
        for c in space.constraints:
            missing = c.names - known
            if missing:
                raise SpaceError(
                    f"constraint {c.source!r} names unknown {', '.join(sorted(missing))}"
                )
        self._columns = self._enumerate()
        self.size = len(next(iter(self._columns.values()))) if self._columns else 0
        self._configs: list[Config] | None = None

    def _enumerate(self) -> dict[str, np.ndarray]:
        """Grow the product one parameter at a time and drop rows as soon as every name a
        constraint uses is bound (prefix pruning, vectorised with NumPy)."""
        pending = list(self.space.constraints)
        columns: dict[str, np.ndarray] = {}
        rows = 1
        for param in self.space.parameters:
            values = np.array(param.values)
            n = len(values)
            if rows * n > MAX_ENUMERATED_ROWS:
                raise SpaceError(
                    f"{self.space.name}: enumerating it would hold {rows * n:,} configurations "
                    f"at {param.name} before its constraints cut them (at most "
                    f"{MAX_ENUMERATED_ROWS:,}); constrain earlier parameters or give fewer values"
                )
            columns = {k: np.repeat(v, n) for k, v in columns.items()}
            columns[param.name] = np.tile(values, rows)
            rows *= n
            bound = set(columns)
            ready = [c for c in pending if c.names <= bound | set(self.context)]
            if ready:
                env = {**self.context, **columns}
                keep = np.ones(rows, dtype=bool)
                for c in ready:
                    keep &= np.broadcast_to(np.asarray(c(env), dtype=bool), (rows,))
                columns = {k: v[keep] for k, v in columns.items()}
                rows = int(keep.sum())
                pending = [c for c in pending if c not in ready]
        return columns

    @property
    def configs(self) -> list[Config]:
        if self._configs is None:
            names = list(self._columns)
            cols = [self._columns[n].tolist() for n in names]
            self._configs = [
                Config(tuple(sorted(zip(names, row, strict=True))))
                for row in zip(*cols, strict=True)
            ]
        return self._configs

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[Config]:
        return iter(self.configs)

    def is_valid(self, config: Config) -> bool:
        """Whether a config (from anywhere: a strategy, a file) satisfies this space."""
        values = config.as_dict()
        if set(values) != set(self.space.names):
            return False
        for p in self.space.parameters:
            if values[p.name] not in p.values:
                return False
        env = {**self.context, **values}
        return all(bool(c(env)) for c in self.space.constraints)
