"""Problems from text and tables: --shape strings, shape-set TOML, CSV rows, stored shape JSON."""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping

from autotune.model.problem import (
    KIND_FIELDS,
    KIND_TEXTS,
    KINDS,
    PROBLEM_TYPES,
    REQUIRED_FIELDS,
    Problem,
    ProblemError,
)
from autotune.model.quoting import quoted


def check_kind(kind: str) -> str:
    if not isinstance(kind, str) or kind not in PROBLEM_TYPES:
        raise ProblemError(f"unknown problem kind {quoted(kind, 40)} (known: {', '.join(KINDS)})")
    return kind


def guess_kind(names: object) -> str:
    """The kind a set of field names describes: M -> gemm, D -> conv3d, otherwise conv2d."""
    present = set(names)  # type: ignore[call-overload]
    if "M" in present:
        return "gemm"
    if "D" in present:
        return "conv3d"
    return "conv2d"


def _known(kind: str) -> tuple[str, ...]:
    return (*KIND_FIELDS[kind], *KIND_TEXTS[kind])


def parse_shape(text: str, kind: str | None = None) -> Problem:
    """Parse 'N=128,K=3,C=64,F=64[,B=..,stride=..,dtype=..,layout=..,epilogue=..]',
    'M=..,N=..,K=..' or 'D=..,R=..,Cc=..,Kd=..,Kr=..,Kc=..'; the kind follows from the field
    names unless given."""
    raw_values: dict[str, str] = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        name, sep, raw = part.partition("=")
        if not sep:
            raise ProblemError(f"shape item {quoted(part)} is not NAME=VALUE")
        if name in raw_values:
            raise ProblemError(f"shape field {quoted(name)} given twice")
        raw_values[name] = raw
    kind = check_kind(kind) if kind else guess_kind(raw_values)
    unknown = [name for name in raw_values if name not in _known(kind)]
    if unknown:
        raise ProblemError(
            f"unknown shape field {quoted(unknown[0], 40)} for a {kind} shape "
            f"(expected {', '.join(_known(kind))})"
        )
    values: dict[str, int | str] = {}
    for name, raw in raw_values.items():
        if name in KIND_TEXTS[kind]:
            values[name] = raw
            continue
        values[name] = strict_int(raw, f"shape field {name}")
    missing = [n for n in REQUIRED_FIELDS[kind] if n not in values]
    if missing:
        raise ProblemError(f"shape {quoted(text)} lacks {', '.join(missing)}")
    return PROBLEM_TYPES[kind](**values)


_DECIMAL = re.compile(r"[+-]?[0-9]+")


def strict_int(raw: str, what: str) -> int:
    """ASCII decimal digits only: int() also reads 1_024, ' 7 ' and other scripts' digits."""
    text = str(raw).strip()
    if not _DECIMAL.fullmatch(text) or len(text) > 30:
        raise ProblemError(f"{what}={quoted(raw)} is not an integer")
    return int(text)


def problem_from_dict(values: Mapping[str, object], kind: str | None = None) -> Problem:
    """Build a problem from a mapping (a TOML table, a CSV row or a stored JSON shape), checking
    field names; empty values are left out, so that a CSV column may be blank."""
    if not isinstance(values, Mapping):
        raise ProblemError(f"a shape must be a table of fields, not {values!r}")
    kind = check_kind(kind) if kind else guess_kind(values)
    # Names first: a file that is no shape file (a CSV header that is any first line) is named
    # by a short, escaped excerpt, never its first lines whole.
    unknown = sorted(str(name) for name in set(values) - set(_known(kind)))
    if unknown:
        raise ProblemError(
            f"unknown shape field(s) {', '.join(quoted(n, 40) for n in unknown[:3])}"
        )
    converted: dict[str, int | str] = {}
    for name, raw in values.items():
        if raw is None or raw == "":
            continue
        if name in KIND_TEXTS[kind]:
            if not isinstance(raw, str):
                raise ProblemError(f"shape field {name}={quoted(raw)} is not a name")
            converted[name] = raw
            continue
        # int() would turn 27.9 into 27 and true into 1; --shape and CSV text refuse both.
        if isinstance(raw, bool) or not isinstance(raw, numbers.Integral | str):
            raise ProblemError(f"shape field {name}={quoted(raw)} is not an integer")
        converted[name] = raw if isinstance(raw, int) else strict_int(raw, f"shape field {name}")
    missing = [n for n in REQUIRED_FIELDS[kind] if n not in converted]
    if missing:
        raise ProblemError(f"shape lacks {', '.join(missing)}")
    return PROBLEM_TYPES[kind](**converted)


__all__ = ["check_kind", "guess_kind", "parse_shape", "problem_from_dict"]
