"""Property-based tests (hypothesis) of the constraint evaluator and the shape parser."""

from __future__ import annotations

import ast
import functools
import math

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autotune.model.expression import Expression, SpaceError
from autotune.model.parsing import parse_shape
from autotune.model.problem import Conv3dProblem, ConvProblem, GemmProblem, ProblemError

# Modest example counts: the whole file stays within a few seconds on two CI cores.
FEW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = ("A", "B", "C", "N", "K")
# Small leaves keep every product of a depth-4 tree inside int64, where NumPy and Python agree.
SMALL = st.integers(-40, 40)

# ---------------------------------------------------------------------------------------------
# Expressions: text generated with the grammar constraints use, evaluated by Python as oracle


@functools.cache
def _numbers(depth: int) -> st.SearchStrategy[str]:
    leaf = st.one_of(st.sampled_from(NAMES), SMALL.map(str), st.sampled_from(["0.5", "2.0"]))
    if depth == 0:
        return leaf
    sub = _numbers(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "//", "%"]), sub).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        sub.map(lambda s: f"(-{s})"),
        st.tuples(st.sampled_from(["min", "max"]), st.lists(sub, min_size=2, max_size=3)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"
        ),
        st.tuples(sub, _booleans(depth - 1), sub).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
    )


@functools.cache
def _booleans(depth: int) -> st.SearchStrategy[str]:
    numbers = _numbers(max(0, depth - 1))
    compare = st.tuples(
        numbers,
        st.lists(
            st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), numbers),
            min_size=1,
            max_size=2,
        ),
    ).map(lambda t: "(" + t[0] + "".join(f" {op} {rhs}" for op, rhs in t[1]) + ")")
    if depth == 0:
        return compare
    sub = _booleans(depth - 1)
    return st.one_of(
        compare,
        st.tuples(sub, st.sampled_from(["and", "or"]), sub).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        sub.map(lambda s: f"(not {s})"),
    )


BINDINGS = st.fixed_dictionaries({name: SMALL for name in NAMES})


def _python(text: str, env: dict[str, int]):
    """Python's own value of the expression (the oracle; never the code under test)."""
    return eval(text, {"__builtins__": {}, "min": min, "max": max}, dict(env))  # noqa: S307


def _agree(ours, theirs) -> bool:
    if isinstance(theirs, bool):
        return bool(ours) is theirs
    ours = float(ours)
    if math.isnan(ours) or math.isinf(ours):
        return False
    return math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-12)


@FEW
@given(text=st.one_of(_numbers(3), _booleans(3)), env=BINDINGS)
def test_the_evaluator_agrees_with_python_where_python_does_not_raise(text, env) -> None:
    expression = Expression(text)  # the grammar above is all allowed
    try:
        expected = _python(text, env)
    except ArithmeticError:  # division by zero: NumPy answers inf/nan/0, or we refuse; no crash
        try:
            expression(env)
        except SpaceError:
            pass
        return
    assert _agree(expression(env), expected), (text, env, expression(env), expected)


@FEW
@given(
    text=st.one_of(_numbers(2), _booleans(2)),
    rows=st.lists(BINDINGS, min_size=1, max_size=6),
)
def test_one_evaluation_over_arrays_equals_one_per_row(text, rows) -> None:
    expression = Expression(text)
    columns = {name: np.array([row[name] for row in rows]) for name in NAMES}
    try:
        vector = np.broadcast_to(np.asarray(expression(columns)), (len(rows),))
    except SpaceError:
        return
    for i, row in enumerate(rows):
        try:
            expected = _python(text, row)
        except ArithmeticError:
            continue
        assert _agree(vector[i], expected), (text, row, vector[i], expected)


ALLOWED_NODES = (
    ast.Expression,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    *(ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod),
    *(ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or),
    *(ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE),
)
# Pieces of hostile and broken Python, so that random text reaches past the parser.
TOKENS = st.sampled_from(
    [
        "A", "N", "K", "min", "max", "__import__", "os", "open", "lambda", "x", ":", "'s'",
        "(", ")", "[", "]", ".", ",", "*", "**", "/", "//", "%", "+", "-", "<", "==", "!=",
        " and ", " or ", "not ", " if ", " else ", " for ", " in ", "=", ";", "1", "0", "9e999",
        "2.5", "True", "None", "\\", "\n", "#",
    ]
)  # fmt: skip


@MANY
@given(text=st.one_of(st.text(max_size=60), st.lists(TOKENS, max_size=14).map("".join)))
def test_random_text_parses_to_a_whitelisted_tree_or_raises_space_error(text) -> None:
    try:
        expression = Expression(text)
    except SpaceError:
        return
    tree = ast.parse(expression.source, mode="eval")
    for node in ast.walk(tree):
        assert isinstance(node, ALLOWED_NODES), (text, type(node).__name__)
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name) and node.func.id in ("min", "max")
    env = dict.fromkeys(expression.names, 3)
    try:
        expression(env)
    except SpaceError:
        pass  # a string in arithmetic, a type clash: refused, never anything else


# ---------------------------------------------------------------------------------------------
# Shapes: problem -> its text -> parse gives the problem back; junk raises ProblemError only

SIZES = st.integers(1, 5000)
CONV2D = st.builds(ConvProblem, N=SIZES, K=st.integers(1, 15), C=SIZES, F=SIZES, B=SIZES,
                   stride=st.integers(1, 8))  # fmt: skip
GEMM = st.builds(GemmProblem, M=SIZES, N=SIZES, K=SIZES)


@st.composite
def _conv3d(draw) -> Conv3dProblem:
    sides = [draw(st.integers(1, 300)) for _ in range(3)]
    taps = [draw(st.integers(1, side)) for side in sides]  # a filter no larger than the input
    return Conv3dProblem(*sides, *taps)


PROBLEMS = st.one_of(CONV2D, GEMM, _conv3d())


@FEW
@given(problem=PROBLEMS)
def test_a_problems_key_parses_back_to_the_problem(problem) -> None:
    assert parse_shape(problem.key) == problem
    assert parse_shape(problem.key, problem.kind) == problem


@FEW
@given(problem=PROBLEMS, data=st.data())
def test_every_field_in_any_order_with_spaces_parses_back(problem, data) -> None:
    items = data.draw(st.permutations(list(problem.as_dict().items())))
    gap = data.draw(st.sampled_from(["", " ", "  "]))
    text = f",{gap}".join(f"{name}{gap}={gap}{value}" for name, value in items)
    assert parse_shape(text) == problem


SHAPE_ALPHABET = st.sampled_from(list("NKCFBMDR=,0123456789- +_x") + ["stride", "Cc", "Kd", "Kr"])


@MANY
@given(text=st.one_of(st.text(max_size=40), st.lists(SHAPE_ALPHABET, max_size=30).map("".join)))
def test_junk_raises_problem_error_and_nothing_else(text) -> None:
    try:
        problem = parse_shape(text)
    except ProblemError:
        return
    # Whatever parses is a valid problem whose own key reads back the same.
    assume(problem is not None)
    assert parse_shape(problem.key) == problem
