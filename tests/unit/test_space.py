from __future__ import annotations

import itertools
import re
import time

import numpy as np
import pytest

from autotune.model.expression import Expression, SpaceError
from autotune.model.space import Config, DeviceLimits, SearchSpace


@pytest.mark.parametrize(
    "hostile",
    [
        "__import__('os').system('x')",
        "open('/etc/passwd')",
        "A.__class__",
        "(lambda: 1)()",
        "[x for x in range(10**9)]",
        "A[0]",
        "getattr(A, 'real')",
        "min",
        "max(*A)",
        "min(A, key=B)",
        "2 ** 999999",
        "A; B",
        "x := 3",
        "'a' * 10",  # string arithmetic is fine at parse time, only runs on strings
    ][:-1],
)
def test_hostile_constraints_are_refused(hostile):
    with pytest.raises(SpaceError):
        Expression(hostile)


def test_overlong_or_deep_constraints_are_refused():
    with pytest.raises(SpaceError, match="longer"):
        Expression("A + " * 200 + "A")
    with pytest.raises(SpaceError, match="too complex"):
        Expression("+".join(["A"] * 120))


def test_syntax_errors_name_the_constraint():
    with pytest.raises(SpaceError, match="'A <'"):
        Expression("A <")


def test_expression_semantics_on_scalars_and_arrays():
    e = Expression("A * 2 <= max(B, 3) and not (A % 2 == 1) or A == 7")
    for a, b in itertools.product(range(10), range(6)):
        expected = (a * 2 <= max(b, 3) and not (a % 2 == 1)) or a == 7
        assert bool(e({"A": a, "B": b})) == expected
    a, b = np.meshgrid(np.arange(10), np.arange(6))
    vector = e({"A": a.ravel(), "B": b.ravel()})
    scalar = [bool(e({"A": x, "B": y})) for x, y in zip(a.ravel(), b.ravel(), strict=True)]
    assert list(vector) == scalar


def test_chained_comparison_and_conditional():
    e = Expression("1 < A <= 4 if B else A == 0")
    assert [bool(e({"A": a, "B": 1})) for a in range(6)] == [False, False, True, True, True, False]
    assert [bool(e({"A": a, "B": 0})) for a in range(3)] == [True, False, False]


@pytest.mark.parametrize(
    "source", ["1 // 0 == 0", "A % (B - B) == 0", "A / B > 1", "max(A, 1) // min(B, 0) > 0"]
)
def test_a_division_by_zero_names_the_constraint(source):
    # NumPy's answer (0 for x // 0, inf for x / 0) would keep or drop configurations silently.
    for env in ({"A": 4, "B": 0}, {"A": np.arange(4), "B": np.array([1, 2, 0, 3])}):
        with pytest.raises(SpaceError, match=f"{re.escape(repr(source))}: division by zero"):
            Expression(source)(env)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("B == 0 or A % B == 0", [True, True, False, False]),
        ("B != 0 and A // B >= 2", [False, True, False, False]),
        ("A // B >= 2 if B else A == 0", [True, True, False, False]),
    ],
)
def test_guarded_divisions_evaluate_only_where_python_would(source, expected):
    env = {"A": np.array([0, 4, 3, 1]), "B": np.array([0, 2, 2, 3])}
    assert list(Expression(source)(env)) == expected
    scalars = [
        Expression(source)({"A": int(a), "B": int(b)}) for a, b in zip(*env.values(), strict=True)
    ]
    assert [bool(x) for x in scalars] == expected


def test_unknown_names_are_reported_when_binding():
    space = SearchSpace.from_dict("t", {"parameters": {"A": [1, 2]}, "constraints": ["A < Q"]})
    with pytest.raises(SpaceError, match="unknown Q"):
        space.bind({"N": 4}, DeviceLimits())


def _brute_force(params, constraints, context):
    names = list(params)
    valid = []
    for combo in itertools.product(*(params[n] for n in names)):
        env = {**context, **dict(zip(names, combo, strict=True))}
        if all(bool(Expression(c)(env)) for c in constraints):
            valid.append(Config.of(dict(zip(names, combo, strict=True))))
    return valid


@pytest.mark.parametrize(
    "params, constraints",
    [
        ({"A": [1, 2, 4, 8], "B": [1, 3, 5], "C": [0, 1]}, ["A * B <= N", "C == 0 or A > 2"]),
        ({"X": [16, 32, 64, 128], "Y": [1, 2, 4, 8, 16]}, ["X * Y <= MAX_THREADS", "X * Y >= 32"]),
        ({"P": [1, 2, 3], "Q": [True, False], "R": [7, 9]}, ["not Q or P + R > 9", "R // P >= 3"]),
        ({"A": [1, 2]}, []),
        ({"A": [1, 2], "B": [1]}, ["A > 5"]),
    ],
)
def test_enumeration_equals_brute_force_itertools(params, constraints):
    space = SearchSpace.from_dict("t", {"parameters": params, "constraints": constraints})
    bound = space.bind({"N": 12, "MAX_THREADS": 256}, DeviceLimits())
    expected = _brute_force(
        params, constraints, {"N": 12, **DeviceLimits().as_dict(), "MAX_THREADS": 256}
    )
    assert sorted(bound.configs, key=str) == sorted(expected, key=str)
    assert len(bound) == len(expected)
    assert all(bound.is_valid(c) for c in expected)


def test_million_point_product_enumerates_quickly():
    params = {"A": list(range(100)), "B": list(range(100)), "C": list(range(100))}
    space = SearchSpace.from_dict(
        "big", {"parameters": params, "constraints": ["A * B <= N", "(A + C) % 3 == 0"]}
    )
    start = time.perf_counter()
    bound = space.bind({"N": 2500}, DeviceLimits())
    assert time.perf_counter() - start < 5.0
    pairs = sum(1 for a in range(100) for b in range(100) if a * b <= 2500)
    assert len(bound) > 0 and len(bound) <= pairs * 34


def test_a_product_too_large_to_enumerate_is_refused_before_it_is_allocated():
    # Ten parameters of ten values and no constraint until the last: 10^10 rows, 31 GiB a column.
    params = {f"P{i}": list(range(10)) for i in range(10)}
    space = SearchSpace.from_dict("wide", {"parameters": params, "constraints": ["P9 < P0"]})
    start = time.perf_counter()
    with pytest.raises(SpaceError, match=r"would hold 10,000,000 configurations at P6 before"):
        space.bind({}, DeviceLimits())
    assert time.perf_counter() - start < 5.0


def test_is_valid_rejects_foreign_values_and_names():
    space = SearchSpace.from_dict("t", {"parameters": {"A": [1, 2]}, "constraints": ["A < 2"]})
    bound = space.bind({}, DeviceLimits())
    assert bound.is_valid(Config.of({"A": 1}))
    assert not bound.is_valid(Config.of({"A": 2}))
    assert not bound.is_valid(Config.of({"A": 3}))
    assert not bound.is_valid(Config.of({"A": 1, "B": 1}))


def test_config_is_hashable_ordered_and_round_trips_json():
    a = Config.of({"B": 2, "A": np.int64(1), "C": True})
    b = Config.of({"C": True, "A": 1, "B": 2})
    assert a == b and hash(a) == hash(b)
    assert Config.from_json(a.to_json()) == a
    assert isinstance(a["A"], int)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[parameters", "malformed TOML"),
        ("constraints = []", "non-empty \\[parameters\\]"),
        ("[parameters]\nlower = [1]", "UPPER_SNAKE"),
        ("[parameters]\nA = []", "non-empty list"),
        ("[parameters]\nA = [1, 1]", "repeats"),
        ("constraints = ['A <']\n[parameters]\nA = [1]", "not valid"),
        ("extra = 1\n[parameters]\nA = [1]", "unknown section"),
    ],
)
def test_bad_space_files_get_one_line_errors(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SpaceError, match=message):
        SearchSpace.from_toml(path)


def test_a_chained_comparison_short_circuits_as_python_does() -> None:
    # Found by the property test: Python never evaluates 4 / A where 0 < A is false.
    chained = Expression("0 < A < 4 / A")
    assert not chained({"A": 0})
    assert list(chained({"A": np.array([0, 1, 2])})) == [False, True, False]
    assert bool(Expression("1 <= A <= 3")({"A": 2}))
    with pytest.raises(SpaceError, match="division by zero"):
        Expression("A / A < 1")({"A": 0})  # where Python would divide, so does the evaluator


def test_space_command_sizes_a_subspace_as_run_would_tune_it(tmp_path) -> None:
    """`autotune space --subspace` counts the configurations `run --subspace` would search: the
    family's space cut to the file's values, bound to the shape."""
    from click.testing import CliRunner

    from autotune.cli.app import main
    from autotune.families import get_family
    from autotune.model.parsing import parse_shape
    from autotune.model.space import ARCH_LIMITS
    from autotune.replay.subspaces import restrict

    shape = "N=64,K=3,C=16,F=32,B=2"
    sub = tmp_path / "sub.toml"
    sub.write_text("[direct_naive]\nBLOCK_X = [8, 16]\n")
    result = CliRunner().invoke(
        main, ["space", "direct_naive", "--shape", shape, "--subspace", str(sub), "--samples", "3"]
    )
    assert result.exit_code == 0, result.output
    family = get_family("direct_naive")
    problem = parse_shape(shape)
    whole = family.load_space().bind(family.space_fields(problem), ARCH_LIMITS["sm_90"])
    cut = restrict(family.load_space(), {"BLOCK_X": (8, 16)})
    expected = cut.bind(family.space_fields(problem), ARCH_LIMITS["sm_90"])
    assert 0 < len(expected) < len(whole)
    assert f": {len(expected)} valid of {cut.cartesian_size} configurations of the subspace" in (
        result.output
    )
    samples = [line for line in result.output.splitlines() if line.startswith("  ")]
    assert len(samples) == 3 and all(re.search(r"\bBLOCK_X=(8|16)\b", line) for line in samples)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[sgemm]\nBM = [64]\n", "pins nothing of direct_naive: it has no [direct_naive] table"),
        ("[direct_naive]\nNOPE = [1]\n", "pinned parameter(s) NOPE unknown"),
        ("[direct_naive]\nBLOCK_X = [3]\n", "BLOCK_X has no value(s) [3]"),
        ("[direct_naive\n", "malformed TOML"),
    ],
)
def test_space_command_refuses_a_subspace_it_cannot_apply(tmp_path, text, message) -> None:
    from click.testing import CliRunner

    from autotune.cli.app import main

    sub = tmp_path / "sub.toml"
    sub.write_text(text)
    result = CliRunner().invoke(
        main, ["space", "direct_naive", "--shape", "N=9,K=3,C=16,F=32", "--subspace", str(sub)]
    )
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
