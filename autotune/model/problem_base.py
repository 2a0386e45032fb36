"""What every problem kind shares: the error a description that cannot be a problem raises,
sizes checked as positive integers, and the bases the kinds build on (a problem's fields, dict
and key as text; a problem whose work is unknown). Apart from the kinds and their table
(problem.py), which build on it; it imports nothing of ours."""

from __future__ import annotations

from dataclasses import asdict, fields


class ProblemError(ValueError):
    """A problem description that cannot be a valid problem of its kind."""


def _check_sizes(problem: object, names: tuple[str, ...] | None = None) -> None:
    """Every size field is a positive integer (bool is refused: True is not a size)."""
    for name in names or [f.name for f in fields(problem)]:  # type: ignore[arg-type]
        value = getattr(problem, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProblemError(f"{name} must be an integer, got {value!r}")
        if value < 1:
            raise ProblemError(f"{name} must be at least 1, got {value}")


class _Problem:
    """What every problem kind says the same way, unless it overrides it: its fields are sizes
    (positive integers), the names a search-space constraint may use, its dict; its key is its
    text."""

    __slots__ = ()

    def __post_init__(self) -> None:
        _check_sizes(self)  # every field a size, unless a kind checks its own way

    def fields(self) -> dict[str, int]:
        """Names a search-space constraint may use."""
        return asdict(self)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def __str__(self) -> str:
        return self.key


class _UnknownWork(_Problem):
    """A problem known by its sizes only, not by the work it does: a recording from elsewhere
    carries times, a user's kernel no FLOP count (GFlop/s shows 0)."""

    __slots__ = ()

    @property
    def flops(self) -> int:
        return 0

    @property
    def min_bytes(self) -> int:
        return 0
