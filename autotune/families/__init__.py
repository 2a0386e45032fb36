"""Registry of kernel families, one module each."""

from __future__ import annotations

from autotune.families.base import Family, UnsupportedProblem
from autotune.families.chen_special import ChenSpecial
from autotune.families.direct_naive import DirectNaive

FAMILIES: dict[str, Family] = {f.name: f for f in (DirectNaive(), ChenSpecial())}


class UnknownFamily(KeyError):
    def __str__(self) -> str:
        return f"unknown family {self.args[0]!r} (known: {', '.join(FAMILIES)})"


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise UnknownFamily(name) from None


__all__ = ["FAMILIES", "Family", "UnknownFamily", "UnsupportedProblem", "get_family"]
