"""Safe constraint expressions: a whitelist of AST nodes, evaluated on scalars or NumPy arrays."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

MAX_EXPRESSION_CHARS = 500
MAX_EXPRESSION_NODES = 200


class SpaceError(ValueError):
    """A search space or constraint that cannot be used."""


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: np.true_divide(a, b),
    ast.FloorDiv: lambda a, b: np.floor_divide(a, b),
    ast.Mod: lambda a, b: np.mod(a, b),
}
# NumPy answers x // 0 with 0 and x / 0 with inf (a warning at most): a constraint would keep
# or drop configurations on a value that means nothing. Python raises; so do we.
_DIVISIONS = (ast.Div, ast.FloorDiv, ast.Mod)
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


# `and`, `or` and `x if c else y` evaluate an operand only where Python would (one element per
# configuration): `X == 0 or N % X == 0` never divides by the X that is 0.


def _rows(env: Mapping[str, Any], where: np.ndarray) -> dict[str, Any]:
    """The environment cut to the configurations `where` selects (scalars stay)."""
    return {
        k: v[where] if isinstance(v, np.ndarray) and v.shape[:1] == where.shape else v
        for k, v in env.items()
    }


def _short_circuit(parts: list, is_and: bool, env: Mapping[str, Any]) -> Any:
    result = np.asarray(parts[0](env), dtype=bool)
    for part in parts[1:]:
        pending = result if is_and else ~result  # where the answer is not known yet
        if not pending.any():
            break
        if pending.ndim == 0:
            result = np.asarray(part(env), dtype=bool)
            continue
        result = result.copy()
        result[pending] = np.asarray(part(_rows(env, pending)), dtype=bool)
    return result if result.ndim else bool(result)


def _choose(test, body, orelse, env: Mapping[str, Any]) -> Any:
    chosen = np.asarray(test(env), dtype=bool)
    if chosen.ndim == 0:
        return body(env) if chosen else orelse(env)
    out_true = body(_rows(env, chosen)) if chosen.any() else None
    out_false = orelse(_rows(env, ~chosen)) if (~chosen).any() else None
    kinds = [np.asarray(x) for x in (out_true, out_false) if x is not None]
    out = np.empty(chosen.shape, dtype=np.result_type(*kinds))
    if out_true is not None:
        out[chosen] = out_true
    if out_false is not None:
        out[~chosen] = out_false
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
            divides = isinstance(node.op, _DIVISIONS)
            divisor = (
                "" if isinstance(node.right, ast.Constant) else f" ({ast.unparse(node.right)} is 0)"
            )

            def arithmetic(env: Mapping[str, Any]) -> Any:
                a, b = left(env), right(env)
                # 'x' * 10**10 would try to build a 10 GB string: strings only compare.
                if isinstance(a, str) or isinstance(b, str):
                    raise self._refuse("arithmetic on a string")
                if divides and np.any(np.asarray(b) == 0):
                    raise SpaceError(f"constraint {self.source!r}: division by zero{divisor}")
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
            is_and = isinstance(node.op, ast.And)
            return lambda env: _short_circuit(parts, is_and, env)
        if isinstance(node, ast.Compare):
            if not all(type(op) in _CMPOPS for op in node.ops):
                raise self._refuse("comparison operator")
            operands = [self._compile(node.left)] + [self._compile(c) for c in node.comparators]
            ops = [_CMPOPS[type(op)] for op in node.ops]
            if len(ops) == 1:
                left, right = operands
                return lambda env: ops[0](left(env), right(env))
            # a < b < c is a < b and b < c, short-circuited as Python does: c is not evaluated
            # where a < b is false (it may divide by zero there). The operands are pure, so b
            # twice is b once.
            pairs = [
                (lambda env, op=op, x=x, y=y: op(x(env), y(env)))
                for op, x, y in zip(ops, operands, operands[1:], strict=False)
            ]
            return lambda env: _short_circuit(pairs, True, env)
        if isinstance(node, ast.IfExp):
            test, body, orelse = (self._compile(n) for n in (node.test, node.body, node.orelse))
            return lambda env: _choose(test, body, orelse, env)
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
