"""User kernel directories: families of a built-in problem kind as <name>.cu plus <name>.toml,
with an optional <name>.py of hooks for what TOML cannot say."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.families import conv2d, gemm
from autotune.families.base import Family
from autotune.families.conv3d import Conv3d
from autotune.families.conv3d import problem_defines as conv3d_defines
from autotune.families.plan import Arg, Buffers, KernelPlan, Launch
from autotune.model.expression import Expression, SpaceError
from autotune.model.problem import PROBLEM_TYPES, REQUIRED_FIELDS
from autotune.model.shapes import shape_set_kinds
from autotune.model.space import Config, DeviceLimits, SearchSpace

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FAMILY_KEYS = {"kind", "description", "tolerance", "layout", "default_shape_set", "launches"}
SPACE_KEYS = {"parameters", "constraints", "description", "defaults"}  # SearchSpace.from_dict's
LAUNCH_KEYS = {"entry", "grid", "block", "smem_bytes", "args"}
# What a <name>.py may define; each takes the TOML's answer as `default` (None where the TOML
# says nothing, e.g. a `plan` hook with no [[family.launches]]) and returns its own.
HOOKS = ("plan", "buffers", "reference_plan")


class KernelDirError(SpaceError):
    """A kernel directory, or a family file in it, that cannot be used: one line naming the
    file, the key and what is wrong."""


@dataclass(frozen=True, slots=True)
class Kind:
    """What a user's family takes from its problem kind: buffers, defines, reference, shapes."""

    buffers: Callable[[Any], Buffers]
    defines: Callable[[Any], tuple[tuple[str, int], ...]]
    reference_plan: Callable[[Any], KernelPlan]
    layout: str
    default_shape_set: str
    reference_source: Path  # the file reference_plan compiles (part of the kernel digest)


_CONV3D = Conv3d()
KINDS: dict[str, Kind] = {
    "conv2d": Kind(
        conv2d.buffers,
        conv2d.problem_defines,
        conv2d.reference_plan,
        Family.layout,
        "general",
        conv2d.REFERENCE_SOURCE,
    ),
    "gemm": Kind(
        gemm.buffers,
        gemm.defines,
        gemm.reference_plan,
        "row-major A (M x K), B (K x N), C (M x N)",
        "alexnet_fc",
        gemm.REFERENCE_SOURCE,
    ),
    "conv3d": Kind(
        _CONV3D.buffers,
        conv3d_defines,
        _CONV3D.reference_plan,
        _CONV3D.layout,
        "conv3d",
        *_CONV3D.reference_sources,
    ),
}


def _sample_problem(kind: str):
    return PROBLEM_TYPES[kind](**{name: 1 for name in REQUIRED_FIELDS[kind]})


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """One [[family.launches]] entry: expressions still to be bound to a problem and config."""

    entry: str
    grid: tuple[Expression, ...]
    block: tuple[Expression, ...]
    smem_bytes: Expression | None
    args: tuple[str, ...]


class TomlFamily(Family):
    """A family read from a kernel directory: its launches are data, evaluated per config."""

    def __init__(
        self,
        name: str,
        directory: Path,
        kind: str,
        space: SearchSpace,
        launches: tuple[LaunchSpec, ...],
        description: str = "",
        tolerance: float = 1e-5,
        layout: str = "",
        default_shape_set: str = "",
        hooks: Mapping[str, Callable] | None = None,
        hooks_path: Path | None = None,
    ) -> None:
        self.name = name
        self.hooks = dict(hooks or {})
        self.hooks_path = hooks_path
        self.directory = directory
        self.kind = kind
        self.space = space
        self.launches = launches
        self.description = description or f"user kernel from {directory}"
        self.paper = f"user kernel directory {directory}"
        self.problem_type = PROBLEM_TYPES[kind]
        self.tolerance = tolerance
        self.layout = layout or KINDS[kind].layout
        self.default_shape_set = default_shape_set or KINDS[kind].default_shape_set
        self.reference_sources = (KINDS[kind].reference_source,)

    def kernel_sources(self) -> tuple[Path, ...]:
        # The hooks module is code of the family too: a plan() there shapes every launch.
        hooks = (self.hooks_path,) if self.hooks_path is not None else ()
        return (*super().kernel_sources(), *hooks)

    def load_space(self) -> SearchSpace:
        return self.space

    def buffers(self, problem) -> Buffers:
        default = KINDS[self.kind].buffers(problem)
        return self._hook("buffers", default, problem)

    def reference_plan(self, problem) -> KernelPlan:
        default = KINDS[self.kind].reference_plan(problem)
        return self._hook("reference_plan", default, problem)

    def plan(self, problem, config: Config) -> KernelPlan:
        default = self._toml_plan(problem, config) if self.launches else None
        return self._hook("plan", default, problem, config)

    def _hook(self, name: str, default, *args):
        hook = self.hooks.get(name)
        if hook is None:
            return default
        try:
            value = hook(*args, default=default)
        except Exception as err:  # a user's code: its failure is one line naming it
            raise KernelDirError(
                f"{self.hooks_path}: {name}(): {type(err).__name__}: {err}"
            ) from None
        wanted = Buffers if name == "buffers" else KernelPlan
        if not isinstance(value, wanted):
            raise KernelDirError(
                f"{self.hooks_path}: {name}(): returned {type(value).__name__}, not a "
                f"{wanted.__name__}"
            )
        return value

    def _toml_plan(self, problem, config: Config) -> KernelPlan:
        env = {**problem.fields(), **config.as_dict()}
        launches = []
        for i, spec in enumerate(self.launches):
            key = f"family.launches[{i}]"
            grid = tuple(
                self._value(e, env, f"{key}.grid[{j}]", 1) for j, e in enumerate(spec.grid)
            )
            block = tuple(
                self._value(e, env, f"{key}.block[{j}]", 1) for j, e in enumerate(spec.block)
            )
            smem = 0
            if spec.smem_bytes is not None:
                smem = self._value(spec.smem_bytes, env, f"{key}.smem_bytes", 0)
            args: tuple[Arg, ...] = tuple(
                name if name in self._buffer_names(problem) else int(env[name])
                for name in spec.args
            )
            launches.append(Launch(spec.entry, _three(grid), _three(block), args, smem_bytes=smem))
        defines = (*KINDS[self.kind].defines(problem), *config.items)
        return KernelPlan(self.source_path, defines, tuple(launches))

    def _buffer_names(self, problem) -> set[str]:
        buffers = self.buffers(problem)
        return {name for name, _ in (*buffers.inputs, *buffers.outputs)}

    def _value(self, expression: Expression, env: Mapping[str, Any], key: str, least: int) -> int:
        try:
            raw = expression(env)
        except SpaceError as err:
            raise KernelDirError(f"{self.space_path}: {key}: {_plain_error(err)}") from None
        value = raw.item() if hasattr(raw, "item") else raw
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise KernelDirError(
                f"{self.space_path}: {key}: {expression.source!r} is {value!r}, not an integer"
            )
        if value != int(value) or int(value) < least:
            raise KernelDirError(
                f"{self.space_path}: {key}: {expression.source!r} is {value!r} at "
                f"{', '.join(f'{k}={v}' for k, v in env.items())}; it must be an integer "
                f">= {least}"
            )
        return int(value)


def _three(values: tuple[int, ...]) -> tuple[int, int, int]:
    padded = (*values, 1, 1)
    return padded[0], padded[1], padded[2]


def _plain_error(err: SpaceError) -> str:
    """The evaluator's message, without the word 'constraint' it uses for search spaces."""
    return str(err).removeprefix("constraint ")


def load_directory(path: str | Path) -> list[TomlFamily]:
    """Every family in a kernel directory: each <name>.toml with its <name>.cu beside it."""
    directory = Path(path)
    if not directory.is_dir():
        raise KernelDirError(f"kernel directory {str(directory)!r} is not a directory")
    tomls = sorted(directory.glob("*.toml"))
    if not tomls:
        raise KernelDirError(
            f"kernel directory {str(directory)!r} holds no family (<name>.cu and <name>.toml)"
        )
    return [load_family(toml) for toml in tomls]


def load_family(toml: Path) -> TomlFamily:
    """One family from its TOML, checked: every problem is bound at plan time, so every name an
    expression uses must be known now."""

    def fail(key: str, what: str) -> KernelDirError:
        return KernelDirError(f"{toml}: {key}: {what}")

    name = toml.stem
    if not name.isidentifier():
        raise fail("file name", f"family name {name!r} must be an identifier")
    if not toml.with_suffix(".cu").is_file():
        raise fail("file name", f"no {name}.cu beside it")
    try:
        data = tomllib.loads(toml.read_text())
    except tomllib.TOMLDecodeError as err:
        raise fail("TOML", f"malformed ({err})") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise fail("TOML", "malformed (nested too deeply)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise fail("TOML", f"cannot be read ({err})") from None
    table = data.pop("family", None)
    stray = sorted(set(data) - SPACE_KEYS)
    if stray:
        raise fail(stray[0], f"unknown key (known: {', '.join(sorted({*SPACE_KEYS, 'family'}))})")
    if not isinstance(table, dict):
        raise fail("family", "a [family] table is required (kind, launches, ...)")
    unknown = sorted(set(table) - FAMILY_KEYS)
    if unknown:
        raise fail(f"family.{unknown[0]}", f"unknown key (known: {', '.join(sorted(FAMILY_KEYS))})")
    kind = table.get("kind")
    if kind not in KINDS:
        raise fail("family.kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    try:
        space = SearchSpace.from_dict(name, data)
    except SpaceError as err:
        key = "constraints" if "constraint" in str(err) else "parameters"
        raise fail(key, str(err)) from None
    fields = set(_sample_problem(kind).fields())
    params = set(space.names)
    clash = sorted(params & fields)
    if clash:
        raise fail(f"parameters.{clash[0]}", "a parameter may not reuse a problem field's name")
    for i, constraint in enumerate(space.constraints):
        unknown_names = sorted(constraint.names - params - fields - set(DeviceLimits().as_dict()))
        if unknown_names:
            raise fail(
                f"constraints[{i}]", f"{constraint.source!r} names unknown {unknown_names[0]!r}"
            )
    description = _text(table, "description", fail)
    layout = _text(table, "layout", fail)
    shape_set = _text(table, "default_shape_set", fail)
    if shape_set and shape_set_kinds().get(shape_set) != kind:
        raise fail("family.default_shape_set", f"{shape_set!r} is not a {kind} shape set")
    tolerance = table.get("tolerance", 1e-5)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not tolerance > 0:
        raise fail("family.tolerance", f"{tolerance!r} is not a positive number")
    hooks_path = toml.with_suffix(".py")
    hooks = _load_hooks(hooks_path) if hooks_path.is_file() else {}
    raw_launches = table.get("launches", [] if "plan" in hooks else None)
    if not isinstance(raw_launches, list) or (not raw_launches and "plan" not in hooks):
        raise fail(
            "family.launches",
            f"at least one [[family.launches]] entry is required (or a plan() in {name}.py)",
        )
    buffers = KINDS[kind].buffers(_sample_problem(kind))
    buffer_names = {n for n, _ in (*buffers.inputs, *buffers.outputs)}
    known = params | fields
    launches = tuple(
        _launch(raw, f"family.launches[{i}]", known, buffer_names, fields, fail)
        for i, raw in enumerate(raw_launches)
    )
    return TomlFamily(
        name,
        toml.parent.resolve(),
        kind,
        space,
        launches,
        description=description,
        tolerance=float(tolerance),
        layout=layout,
        default_shape_set=shape_set,
        hooks=hooks,
        hooks_path=hooks_path if hooks else None,
    )


def _load_hooks(path: Path) -> dict[str, Callable]:
    """The hooks a family's <name>.py defines; importing it runs the user's code, as a
    Kernel Tuner script does, so its errors are one line naming the file."""
    module_name = f"autotune_user_family_{abs(hash(str(path.resolve())))}_{path.stem}"
    try:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as err:
        raise KernelDirError(f"{path}: import: {type(err).__name__}: {err}") from None
    hooks = {name: getattr(module, name) for name in HOOKS if callable(getattr(module, name, None))}
    if not hooks:
        raise KernelDirError(f"{path}: defines none of {', '.join(f'{h}()' for h in HOOKS)}")
    return hooks


def _text(table: Mapping[str, Any], key: str, fail) -> str:
    value = table.get(key, "")
    if not isinstance(value, str):
        raise fail(f"family.{key}", f"{value!r} is not a string")
    return value


def _launch(
    raw, key: str, known: set[str], buffers: set[str], fields: set[str], fail
) -> LaunchSpec:
    if not isinstance(raw, dict):
        raise fail(key, "must be a table")
    unknown = sorted(set(raw) - LAUNCH_KEYS)
    if unknown:
        raise fail(f"{key}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(LAUNCH_KEYS))})")
    entry = raw.get("entry")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise fail(f"{key}.entry", f"{entry!r} is not a __global__ function name")

    def expression(text: Any, where: str) -> Expression:
        if isinstance(text, int) and not isinstance(text, bool):
            text = str(text)
        if not isinstance(text, str):
            raise fail(where, f"{text!r} is not an expression (a string or an integer)")
        try:
            parsed = Expression(text)
        except SpaceError as err:
            raise fail(where, _plain_error(err)) from None
        names = sorted(parsed.names - known)
        if names:
            raise fail(where, f"{parsed.source!r} names unknown {names[0]!r}")
        return parsed

    def dims(what: str) -> tuple[Expression, ...]:
        values = raw.get(what)
        if not isinstance(values, list) or not 1 <= len(values) <= 3:
            raise fail(f"{key}.{what}", "must be a list of 1 to 3 expressions")
        return tuple(expression(v, f"{key}.{what}[{j}]") for j, v in enumerate(values))

    grid, block = dims("grid"), dims("block")
    smem = raw.get("smem_bytes")
    smem_bytes = None if smem is None else expression(smem, f"{key}.smem_bytes")
    args = raw.get("args")
    if not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args):
        raise fail(f"{key}.args", "must be a non-empty list of names")
    for arg in args:
        if arg not in buffers and arg not in fields:
            raise fail(
                f"{key}.args",
                f"{arg!r} is neither a buffer ({', '.join(sorted(buffers))}) nor a problem field "
                f"({', '.join(sorted(fields))})",
            )
    return LaunchSpec(entry, grid, block, smem_bytes, tuple(args))


__all__ = ["KINDS", "KernelDirError", "TomlFamily", "load_directory", "load_family"]
