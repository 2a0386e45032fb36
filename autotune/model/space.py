"""Search spaces: parameters, safe constraint expressions, enumeration and the Config value."""

from __future__ import annotations

import ast
import json
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Value = int | float | bool | str

MAX_EXPRESSION_CHARS = 500
# The partial product held while enumerating: 4x the largest family's (sgemm, 1.04e6), at most
# a few hundred MB of columns. A space without constraints on its first parameters tried 31 GiB.
MAX_ENUMERATED_ROWS = 4_000_000
MAX_EXPRESSION_NODES = 200


class SpaceError(ValueError):
    """A search space or constraint that cannot be used."""


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
# Safe expressions


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: np.true_divide(a, b),
    ast.FloorDiv: lambda a, b: np.floor_divide(a, b),
    ast.Mod: lambda a, b: np.mod(a, b),
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
# How a refused operator or node is named in the error (the rest go by their AST class name).
_REFUSED_OPS = {ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@"}
_REFUSED_OPS |= {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_REFUSED_NODES = {ast.Attribute: "attribute access", ast.Subscript: "indexing"}
_FUNCS: dict[str, Callable[..., Any]] = {
    "min": lambda *args: _reduce(np.minimum, args),
    "max": lambda *args: _reduce(np.maximum, args),
}


def _reduce(op: Callable[[Any, Any], Any], args: tuple[Any, ...]) -> Any:
    out = args[0]
    for arg in args[1:]:
        out = op(out, arg)
    return out


class Expression:
    """An arithmetic/boolean expression over names, checked against a whitelist of AST nodes.

    Evaluates on scalars or on NumPy arrays (one element per candidate configuration), so the
    same expression prunes a whole batch of configurations at once. Never calls eval().
    """

    def __init__(self, source: str) -> None:
        if not isinstance(source, str) or not source.strip():
            raise SpaceError("a constraint must be a non-empty string")
        if len(source) > MAX_EXPRESSION_CHARS:
            raise SpaceError(f"constraint longer than {MAX_EXPRESSION_CHARS} characters")
        self.source = source.strip()
        try:
            with warnings.catch_warnings():
                # '1if 1else 2' parses with a warning on stderr: noise beside a one-line error.
                warnings.simplefilter("ignore", SyntaxWarning)
                tree = ast.parse(self.source, mode="eval")
        except SyntaxError as err:
            raise SpaceError(f"constraint {self.source!r} is not valid: {err.msg}") from None
        nodes = list(ast.walk(tree))
        if len(nodes) > MAX_EXPRESSION_NODES:
            raise SpaceError(f"constraint {self.source!r} is too complex")
        self.names: frozenset[str] = frozenset()
        self._fn = self._compile(tree.body)
        self.names = frozenset(
            n.id for n in nodes if isinstance(n, ast.Name) and n.id not in _FUNCS
        )

    def _compile(self, node: ast.AST) -> Callable[[Mapping[str, Any]], Any]:
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool | int | float | str):
                return lambda env: value
            raise self._refuse(f"constant {value!r}")
        if isinstance(node, ast.Name):
            name = node.id
            if name in _FUNCS:
                raise self._refuse(f"bare function name {name!r}")

            def lookup(env: Mapping[str, Any]) -> Any:
                try:
                    return env[name]
                except KeyError:
                    raise SpaceError(f"constraint {self.source!r} names unknown {name!r}") from None

            return lookup
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            op, left, right = (
                _BINOPS[type(node.op)],
                self._compile(node.left),
                self._compile(node.right),
            )

            def arithmetic(env: Mapping[str, Any]) -> Any:
                a, b = left(env), right(env)
                # 'x' * 10**10 would try to build a 10 GB string: strings only compare.
                if isinstance(a, str) or isinstance(b, str):
                    raise self._refuse("arithmetic on a string")
                return op(a, b)

            return arithmetic
        if isinstance(node, ast.BinOp):
            raise self._refuse(
                f"operator {_REFUSED_OPS.get(type(node.op), type(node.op).__name__)}"
            )
        if isinstance(node, ast.UnaryOp):
            operand = self._compile(node.operand)
            if isinstance(node.op, ast.Not):
                return lambda env: np.logical_not(operand(env))
            if isinstance(node.op, ast.USub):
                return lambda env: -operand(env)
            if isinstance(node.op, ast.UAdd):
                return operand
            raise self._refuse(type(node.op).__name__)
        if isinstance(node, ast.BoolOp):
            parts = [self._compile(v) for v in node.values]
            combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
            return lambda env: _reduce(combine, tuple(p(env) for p in parts))
        if isinstance(node, ast.Compare):
            if not all(type(op) in _CMPOPS for op in node.ops):
                raise self._refuse("comparison operator")
            operands = [self._compile(node.left)] + [self._compile(c) for c in node.comparators]
            ops = [_CMPOPS[type(op)] for op in node.ops]

            def compare(env: Mapping[str, Any]) -> Any:
                values = [o(env) for o in operands]
                result = ops[0](values[0], values[1])
                for i in range(1, len(ops)):
                    result = np.logical_and(result, ops[i](values[i], values[i + 1]))
                return result

            return compare
        if isinstance(node, ast.IfExp):
            test, body, orelse = (self._compile(n) for n in (node.test, node.body, node.orelse))
            return lambda env: np.where(test(env), body(env), orelse(env))
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS:
                raise self._refuse("function call")
            if node.keywords or not node.args or any(isinstance(a, ast.Starred) for a in node.args):
                raise self._refuse("call form")
            fn, args = _FUNCS[node.func.id], [self._compile(a) for a in node.args]
            return lambda env: fn(*(a(env) for a in args))
        raise self._refuse(_REFUSED_NODES.get(type(node), type(node).__name__))

    def _refuse(self, what: str) -> SpaceError:
        return SpaceError(f"constraint {self.source!r}: {what} is not allowed")

    def __call__(self, env: Mapping[str, Any]) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            try:
                return self._fn(env)
            except SpaceError:
                raise
            except (TypeError, ValueError, ZeroDivisionError, OverflowError) as err:
                raise SpaceError(f"constraint {self.source!r} failed: {err}") from None

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"


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
