"""Spaces recorded elsewhere: a space that is the list of configurations a recording holds, and
the stand-in family a replay tunes them under (no kernel, no compiler, no GPU)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from autotune.model.space import BoundSpace, Config, Parameter, SearchSpace, Value


class ListedSpace(BoundSpace):
    """A bound space given by its configurations, not by constraints: a Kernel Tuner cache file
    stores the configurations its restrictions let through, not the restrictions, so the file's
    configurations are the space. Parameters keep the file's order and value lists (local search
    and the samplers read them); validity is membership."""

    def __init__(self, name: str, tunables: Sequence[tuple[str, Sequence[Value]]], configs):
        self.space = SearchSpace(name, tuple(Parameter(n, tuple(v)) for n, v in tunables))
        self.context = {}
        # In the order of the product of the value lists (the order Kernel Tuner enumerates),
        # whatever order the file had: a brute-force walk and the seeds' ties stay reproducible.
        position = [{v: i for i, v in enumerate(values)} for _, values in tunables]
        names = [n for n, _ in tunables]

        def rank(c: Config) -> tuple:
            return tuple(p.get(c[n], len(p)) for n, p in zip(names, position, strict=True))

        self._configs = sorted(dict.fromkeys(configs), key=rank)
        self._valid = frozenset(self._configs)
        self.size = len(self._configs)
        self._columns = {}

    def is_valid(self, config: Config) -> bool:
        return config in self._valid


@dataclass(frozen=True, slots=True)
class RecordedFamily:
    """What the tuner needs of a family to replay a recorded study: its name, nothing to plan.
    Stored configs need no completion (no tunable was added since the file was written)."""

    name: str
    later_tunables = {}  # noqa: RUF012 - read only, like Family's

    def kernel_digest(self) -> str:
        """No code of ours: a recording's rows are keyed by the recording alone."""
        return ""

    def complete(self, config: Config) -> Config:
        return config

    def predated(self, stored: Iterable[Config]) -> tuple[str, ...]:
        return ()

    def plan(self, problem, config):  # pragma: no cover - a replay never plans
        raise NotImplementedError(f"{self.name} is a recorded space: there is no kernel to run")


def tunables_of(configs: Iterable[Config]) -> list[tuple[str, list[Value]]]:
    """Parameter value lists read off configurations (sorted values, names in first-seen order),
    for a recording that does not list them (T4 files)."""
    values: dict[str, set] = {}
    for c in configs:
        for k, v in c.items:
            values.setdefault(k, set()).add(v)
    return [(k, sorted(v, key=lambda x: (str(type(x)), x))) for k, v in values.items()]


__all__ = ["ListedSpace", "RecordedFamily", "tunables_of"]
