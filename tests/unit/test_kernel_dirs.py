"""Kernel directories without a GPU or NVRTC: the loader on good and bad family TOMLs (each
error one line naming the file and the key), the registry refusing shadowing, and the plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.families import FAMILIES, UnknownFamily, get_family, with_directories
from autotune.families.directory import KernelDirError, load_directory
from autotune.model.problem import ConvProblem, GemmProblem
from autotune.model.space import ARCH_LIMITS, Config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "direct_conv2d"

GOOD = """
constraints = ["BX * BY <= MAX_THREADS"]

[parameters]
BX = [16, 32]
BY = [1, 4]

[family]
kind = "conv2d"
description = "a test family"
tolerance = 1e-4

[[family.launches]]
entry = "k"
grid = ["(N + BX - 1) // BX", "(N + BY - 1) // BY", "B * F"]
block = ["BX", "BY"]
smem_bytes = "BX * BY * 4"
args = ["x", "w", "y", "N"]
"""


def _write(directory: Path, name: str, text: str, cu: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    if cu:
        (directory / f"{name}.cu").write_text('extern "C" __global__ void k() {}\n')
    toml = directory / f"{name}.toml"
    toml.write_text(text)
    return toml


def test_a_good_family_loads_and_plans_from_its_toml(tmp_path):
    _write(tmp_path, "mine", GOOD)
    (family,) = load_directory(tmp_path)
    assert family.name == "mine" and family.problem_type is ConvProblem
    assert family.tolerance == 1e-4 and family.description == "a test family"
    assert family.default_shape_set == "general" and family.source_path == tmp_path / "mine.cu"
    problem = ConvProblem(N=37, K=3, C=2, F=5, B=2)
    plan = family.plan(problem, Config.of({"BX": 16, "BY": 4}))
    (launch,) = plan.launches
    assert launch.kernel == "k" and launch.grid == (3, 10, 10) and launch.block == (16, 4, 1)
    assert launch.smem_bytes == 256 and launch.args == ("x", "w", "y", 37)
    # The kind's defines as the built-in conv2d families pass them, then every parameter.
    assert plan.defines == (
        ("B", 2), ("C", 2), ("N", 37), ("K", 3), ("F", 5), ("STRIDE", 1), ("BX", 16), ("BY", 4)
    )  # fmt: skip
    assert family.buffers(problem).outputs == (("y", (2, 5, 37, 37)),)
    assert family.reference_plan(problem).launches[0].args == ("x", "w", "y_ref")
    assert len(family.load_space().bind(problem.fields(), ARCH_LIMITS["sm_90"])) == 4


def test_a_gemm_family_takes_the_gemm_buffers_and_defines(tmp_path):
    text = GOOD.replace('"conv2d"', '"gemm"').replace('"B * F"', '"1"')
    text = text.replace('["x", "w", "y", "N"]', '["a", "b", "c", "M"]')
    _write(tmp_path, "g", text)
    (family,) = load_directory(tmp_path)
    plan = family.plan(GemmProblem(M=8, N=40, K=3), Config.of({"BX": 32, "BY": 1}))
    assert plan.defines[:3] == (("M", 8), ("N", 40), ("K", 3))
    assert plan.launches[0].args == ("a", "b", "c", 8) and plan.launches[0].grid == (2, 40, 1)
    assert family.default_shape_set == "alexnet_fc"


def test_the_example_registers_beside_the_built_in_families():
    registry = with_directories([EXAMPLE])
    assert set(registry) == {*FAMILIES, "direct_conv2d"}
    family = get_family("direct_conv2d", registry)
    assert family.space_path == EXAMPLE / "direct_conv2d.toml"
    assert "direct_conv2d" not in FAMILIES  # the built-in registry is left alone
    with pytest.raises(UnknownFamily, match="direct_conv2d"):
        get_family("nope", registry)


def test_a_user_family_may_not_shadow_a_built_in_or_an_earlier_one(tmp_path):
    _write(tmp_path / "a", "direct_naive", GOOD)
    with pytest.raises(KernelDirError, match="direct_naive.toml: family name 'direct_naive' is a"):
        with_directories([tmp_path / "a"])
    _write(tmp_path / "b", "mine", GOOD)
    _write(tmp_path / "c", "mine", GOOD)
    with pytest.raises(KernelDirError, match="'mine' is taken by"):
        with_directories([tmp_path / "b", tmp_path / "c"])


@pytest.mark.parametrize(
    "text, key, what",
    [
        ("[parameters\n", "TOML", "malformed"),
        (GOOD.split("[family]")[0], "family", "a [family] table is required"),
        (GOOD.replace('kind = "conv2d"', 'kind = "fft"'), "family.kind", "'fft' is not one of"),
        (GOOD.replace("tolerance = 1e-4", "tolerance = -1"), "family.tolerance", "positive"),
        (GOOD.replace("tolerance = 1e-4", "colour = 1"), "family.colour", "unknown key"),
        (
            GOOD.replace('description = "a test family"', "description = 3"),
            "family.description",
            "not a string",
        ),
        (
            GOOD.replace('kind = "conv2d"', 'kind = "conv2d"\ndefault_shape_set = "alexnet_fc"'),
            "family.default_shape_set",
            "not a conv2d shape set",
        ),
        (GOOD.split("[[family.launches]]")[0], "family.launches", "at least one"),
        (
            GOOD.replace('entry = "k"', 'entry = "k()"'),
            "family.launches[0].entry",
            "not a __global__",
        ),
        (
            GOOD.replace('entry = "k"', 'entry = "k"\nthreads = 4'),
            "family.launches[0].threads",
            "unknown key",
        ),
        (
            GOOD.replace('"BX", "BY"]', '"BX", "BY", "1", "1"]'),
            "family.launches[0].block",
            "1 to 3",
        ),
        (GOOD.replace('"B * F"]', '"B * Q"]'), "family.launches[0].grid[2]", "names unknown 'Q'"),
        (
            GOOD.replace('"B * F"]', '"B ** F"]'),
            "family.launches[0].grid[2]",
            "operator ** is not allowed",
        ),
        (
            GOOD.replace('"B * F"]', '"__import__(1)"]'),
            "family.launches[0].grid[2]",
            "function call",
        ),
        (GOOD.replace('"B * F"]', '"B *"]'), "family.launches[0].grid[2]", "is not valid"),
        (GOOD.replace('"B * F"]', "1.5]"), "family.launches[0].grid[2]", "not an expression"),
        (
            GOOD.replace('"BX * BY * 4"', '"SMEM"'),
            "family.launches[0].smem_bytes",
            "names unknown 'SMEM'",
        ),
        (GOOD.replace('"y", "N"]', '"z"]'), "family.launches[0].args", "'z' is neither a buffer"),
        (GOOD.replace('["x", "w", "y", "N"]', "[]"), "family.launches[0].args", "non-empty list"),
        (
            GOOD.replace('["BX * BY <= MAX_THREADS"]', '["BX <= WIDTH"]'),
            "constraints[0]",
            "names unknown 'WIDTH'",
        ),
        (GOOD.replace("BY = [1, 4]", "BY = []"), "parameters", "non-empty list"),
        ("launches = 1\n" + GOOD, "launches", "unknown key"),
        (GOOD.replace("BY = [1, 4]", "by = [1, 4]"), "parameters", "UPPER_SNAKE"),
        (GOOD.replace("BX = [16, 32]", "BX = [16, 32]\nS = [1]"), "parameters.S", "problem field"),
    ],
)
def test_each_error_in_a_family_toml_is_one_line_naming_file_and_key(tmp_path, text, key, what):
    toml = _write(tmp_path, "mine", text)
    with pytest.raises(KernelDirError) as err:
        load_directory(tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{toml}: {key}: "), message
    assert what in message, message


def test_a_directory_without_families_or_a_toml_without_its_source_is_refused(tmp_path):
    with pytest.raises(KernelDirError, match="is not a directory"):
        load_directory(tmp_path / "missing")
    with pytest.raises(KernelDirError, match="holds no family"):
        load_directory(tmp_path)
    toml = _write(tmp_path, "lonely", GOOD, cu=False)
    with pytest.raises(KernelDirError, match=f"{toml}: file name: no lonely.cu beside it"):
        load_directory(tmp_path)


@pytest.mark.parametrize(
    "grid, what",
    [("N // (2 * BX)", "must be an integer >= 1"), ("N / BX", "must be an integer >= 1")],
)
def test_a_launch_expression_without_a_positive_integer_value_fails_naming_the_key(
    tmp_path, grid, what
):
    toml = _write(tmp_path, "mine", GOOD.replace('"(N + BX - 1) // BX"', f'"{grid}"'))
    (family,) = load_directory(tmp_path)
    with pytest.raises(KernelDirError) as err:
        family.plan(ConvProblem(N=20, K=3, C=1, F=1), Config.of({"BX": 32, "BY": 1}))
    message = str(err.value)
    assert message.startswith(f"{toml}: family.launches[0].grid[0]: ") and what in message
    assert "\n" not in message


HOOKS = """
import dataclasses


def plan(problem, config, default):
    # What TOML cannot say: a constant-memory copy of the filters, and a second launch.
    extra = dataclasses.replace(default.launches[0], kernel="k2", grid=(problem.F, 1, 1))
    return dataclasses.replace(
        default, launches=(*default.launches, extra), constants=(("w_const", "w"),)
    )
"""


def test_a_py_beside_the_toml_replaces_what_it_defines(tmp_path):
    _write(tmp_path, "mine", GOOD)
    (tmp_path / "mine.py").write_text(HOOKS)
    (family,) = load_directory(tmp_path)
    problem = ConvProblem(N=37, K=3, C=2, F=5, B=2)
    plan = family.plan(problem, Config.of({"BX": 16, "BY": 4}))
    assert [launch.kernel for launch in plan.launches] == ["k", "k2"]
    assert plan.launches[1].grid == (5, 1, 1) and plan.constants == (("w_const", "w"),)
    # Hooks it does not define keep the TOML's (the kind's) answer.
    assert family.buffers(problem).outputs == (("y", (2, 5, 37, 37)),)


def test_a_plan_hook_stands_in_for_the_launches(tmp_path):
    text = GOOD[: GOOD.index("[[family.launches]]")]
    _write(tmp_path, "mine", text)
    (tmp_path / "mine.py").write_text(
        "from autotune.families.plan import KernelPlan, Launch\n"
        "def plan(problem, config, default):\n"
        "    assert default is None\n"
        "    return KernelPlan(SOURCE, (), (Launch('k', (1, 1, 1), (32, 1, 1), ('x',)),))\n"
        f"SOURCE = __import__('pathlib').Path({str(tmp_path / 'mine.cu')!r})\n"
    )
    (family,) = load_directory(tmp_path)
    plan = family.plan(ConvProblem(N=4, K=3, C=1, F=1), Config.of({"BX": 16, "BY": 1}))
    assert plan.launches[0].block == (32, 1, 1)


@pytest.mark.parametrize(
    "py, message",
    [
        ("raise ValueError('broken on import')", "import: ValueError: broken on import"),
        ("x = 1", "defines none of plan(), buffers(), reference_plan()"),
        ("def plan(problem, config, default):\n    return 3", "plan(): returned int, not a"),
        ("def plan(problem, config, default):\n    return 1 / 0", "plan(): ZeroDivisionError"),
    ],
)
def test_a_broken_py_is_one_line_naming_the_file(tmp_path, py, message):
    _write(tmp_path, "mine", GOOD)
    (tmp_path / "mine.py").write_text(py)
    with pytest.raises(KernelDirError) as err:
        (family,) = load_directory(tmp_path)
        family.plan(ConvProblem(N=4, K=3, C=1, F=1), Config.of({"BX": 16, "BY": 1}))
    text = str(err.value)
    assert "\n" not in text and str(tmp_path / "mine.py") in text and message in text
