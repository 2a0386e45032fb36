"""Shape sets: named sets kept as data, shapes from the command line, CSV and TOML files."""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import sys
from collections.abc import Iterable
from pathlib import Path

from autotune import package_path
from autotune.model.parsing import check_kind, guess_kind, parse_shape, problem_from_dict
from autotune.model.precision import DEFAULT_DTYPE, DEFAULT_LAYOUT
from autotune.model.problem import ConvProblem, Problem, ProblemError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SHAPE_SETS_FILE = package_path("autotune", "data", "shape_sets.toml")


def read_toml(path: Path, what: str) -> dict[str, dict]:
    """A TOML data file of the package (`what` names it in errors), or a one-line ProblemError."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as err:
        raise ProblemError(f"cannot read the {what} ({err})") from None
    except tomllib.TOMLDecodeError as err:
        raise ProblemError(f"{path}: malformed TOML ({err})") from None


def _load_sets() -> dict[str, dict]:
    return read_toml(SHAPE_SETS_FILE, "shape sets")


def shape_set_names() -> list[str]:
    return list(_load_sets())


def describe_shape_sets() -> dict[str, str]:
    return {name: spec.get("description", "") for name, spec in _load_sets().items()}


def shape_set_kinds() -> dict[str, str]:
    """The problem kind of every named set (conv2d unless the set says otherwise)."""
    return {name: spec.get("kind", "conv2d") for name, spec in _load_sets().items()}


def _expand(spec: dict, origin: str) -> list[Problem]:
    """A set's problems; its `kind` names the problem type, or the field names tell it. Every
    error names the origin once."""
    try:
        return _expand_checked(spec)
    except ProblemError as err:
        raise ProblemError(f"{origin}: {err}") from None


# What a whole set may name for every one of its shapes (a layer or grid naming it wins).
SET_TEXTS = ("dtype", "layout", "epilogue")


def _expand_checked(spec: dict) -> list[Problem]:
    kind = spec.get("kind")
    if kind is not None:
        check_kind(kind)
    common = {name: spec[name] for name in SET_TEXTS if name in spec}
    if common and (kind or "conv2d") != "conv2d":
        raise ProblemError(f"only conv2d sets name a {' or '.join(common)}")
    if "grid" in spec:
        grid = spec["grid"]
        if not isinstance(grid, dict) or not all(isinstance(v, list) for v in grid.values()):
            raise ProblemError("'grid' must be a table of value lists (N = [64, 128], ...)")
        grid = dict(grid)
        tied = grid.pop("CF", None)  # C = F, as in Chen et al.'s general-case sweep
        names = list(grid)
        problems = []
        for combo in itertools.product(*(grid[n] for n in names)):
            values = {**common, **dict(zip(names, combo, strict=True))}
            for cf in tied or [None]:
                if cf is not None:
                    values = {**values, "C": cf, "F": cf}
                problems.append(problem_from_dict(values, kind))
        return problems
    if "layers" in spec:
        layers = spec["layers"]
        if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
            raise ProblemError("'shapes' and 'layers' must be lists of tables ({N = 64, ...})")
        return [
            problem_from_dict({**common, **{k: v for k, v in layer.items() if k != "name"}}, kind)
            for layer in layers
        ]
    raise ProblemError("a shape set needs 'grid', 'layers' or 'shapes'")


def named_shapes(name: str) -> list[Problem]:
    sets = _load_sets()
    if name not in sets:
        raise ProblemError(f"unknown shape set {name!r} (known: {', '.join(sets)})")
    return _expand(sets[name], name)


def shapes_from_file(path: str | Path) -> list[Problem]:
    """Read shapes from a CSV (header with N,K,C,F[,B,stride], M,N,K or D,R,Cc,Kd,Kr,Kc; the
    header's names give the kind) or TOML file (a 'shapes' list, a 'grid' table or a 'layers'
    list, with an optional top-level `kind`, and `dtype`, `layout` and `epilogue` for every
    shape)."""
    path = Path(path)
    if path.is_dir():
        raise ProblemError(f"shape file {str(path)!r} is a directory")
    if not path.is_file():
        raise ProblemError(f"shape file {str(path)!r} does not exist")
    if path.suffix.lower() == ".csv":
        # utf-8-sig: spreadsheets start their CSV with a byte-order mark.
        rows = list(csv.DictReader(io.StringIO(_read_text(path, "shape file"), newline="")))
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
            data = tomllib.loads(_read_text(path, "shape file"))
        except tomllib.TOMLDecodeError as err:
            raise ProblemError(f"{path}: malformed TOML ({err})") from None
        except RecursionError:  # tomllib recurses once per level of nesting
            raise ProblemError(f"{path}: malformed TOML (nested too deeply)") from None
        if "shapes" in data:
            kept = ("kind", *SET_TEXTS)
            data = {**{k: v for k, v in data.items() if k in kept}, "layers": data["shapes"]}
        return _expand(data, str(path))
    raise ProblemError(f"shape file {str(path)!r} must end in .csv or .toml")


def _read_text(path: Path, what: str) -> str:
    """A file's text as UTF-8 (a byte-order mark dropped), or a one-line ProblemError."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise ProblemError(f"{what} {str(path)!r} is not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ProblemError(f"cannot read {what} {str(path)!r}: {err.strerror or err}") from None


def collect_shapes(
    sets: tuple[str, ...] = (),
    shapes: tuple[str, ...] = (),
    files: tuple[str, ...] = (),
    dtypes: Iterable[str] = (),
    layouts: Iterable[str] = (),
    strict: bool = True,
) -> list[Problem]:
    """Union of shapes from named sets, --shape strings and files, first occurrence kept; each
    2D convolution in every one of `dtypes` and `layouts` (when given) unless it names its own
    (see in_precisions)."""
    dtypes, layouts = tuple(dtypes), tuple(layouts)
    found: list[Problem] = []
    for name in sets:
        found.extend(in_precisions(named_shapes(name), dtypes, layouts, strict=strict))
    for text in shapes:
        named = {part.partition("=")[0].strip() for part in text.split(",")}
        found.extend(in_precisions([parse_shape(text)], dtypes, layouts, named, strict))
    for path in files:
        found.extend(in_precisions(shapes_from_file(path), dtypes, layouts, strict=strict))
    return list(dict.fromkeys(found))


@dataclasses.dataclass(frozen=True)
class ShapeSelection:
    """The problem shapes a command was given (--shapes, --shape, --shape-file), each 2D
    convolution in every dtype and layout asked for (--dtype, --layout)."""

    sets: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    layouts: tuple[str, ...] = ()

    @property
    def named(self) -> bool:
        """Whether any shape was named; otherwise the command's default shapes apply."""
        return bool(self.sets or self.shapes or self.files)

    def problems(
        self,
        dtypes: Iterable[str] | None = None,
        layouts: Iterable[str] | None = None,
        strict: bool = True,
    ) -> list[Problem]:
        """The shapes named (collect_shapes), in these dtypes and layouts where given instead
        of the selection's own."""
        dtypes = self.dtypes if dtypes is None else dtypes
        layouts = self.layouts if layouts is None else layouts
        return collect_shapes(self.sets, self.shapes, self.files, dtypes, layouts, strict)


def in_precisions(
    problems: Iterable[Problem],
    dtypes: Iterable[str] = (),
    layouts: Iterable[str] = (),
    named: Iterable[str] = (),
    strict: bool = True,
) -> list[Problem]:
    """Each problem in every dtype and layout asked for (none asked: as it is). A 2D convolution
    keeps a dtype or layout it names itself (one in `named`, or any that is not the default:
    a set's layer that says bf16 stays bf16). Other kinds compute FP32 only: kept as they are
    where fp32 and NCHW are among those asked, refused otherwise (left out if not `strict`)."""
    dtypes, layouts, named = tuple(dtypes), tuple(layouts), set(named)
    found: list[Problem] = []
    for problem in problems:
        if not isinstance(problem, ConvProblem):
            fp32 = (not dtypes or DEFAULT_DTYPE in dtypes) and (
                not layouts or DEFAULT_LAYOUT in layouts
            )
            if not fp32 and not strict:
                continue
            if dtypes and DEFAULT_DTYPE not in dtypes:
                raise ProblemError(
                    f"{problem.key} is a {problem.kind} shape, computed in fp32 only "
                    f"(--dtype {'/'.join(dtypes)} applies to conv2d shapes)"
                )
            if layouts and DEFAULT_LAYOUT not in layouts:
                raise ProblemError(
                    f"{problem.key} is a {problem.kind} shape, which has no layout "
                    f"(--layout {'/'.join(layouts)} applies to conv2d shapes)"
                )
            found.append(problem)
            continue
        own_dtype = "dtype" in named or problem.dtype != DEFAULT_DTYPE
        own_layout = "layout" in named or problem.layout != DEFAULT_LAYOUT
        for dtype in (problem.dtype,) if own_dtype or not dtypes else dtypes:
            for layout in (problem.layout,) if own_layout or not layouts else layouts:
                found.append(dataclasses.replace(problem, dtype=dtype, layout=layout))
    return list(dict.fromkeys(found))
