"""The compile-ahead queue: how many compiles run at once, and its hand-off (the GPU takes
whichever candidate is compiled first)."""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TypeVar

T = TypeVar("T")


def compile_jobs(jobs: int | None = None) -> int:
    """Compiles at once (processes of NVRTC): `jobs`, or one a CPU."""
    return max(1, jobs or os.cpu_count() or 1)


def next_ready(pending: deque[tuple[T, Future]]) -> tuple[T, Future]:
    """Remove and return the earliest-asked entry whose compilation has finished, waiting for
    one only when none has: the GPU never idles behind a slow compile while finished work waits.
    Among finished entries the ask order is kept, so with instant compiles nothing reorders."""
    if not pending:
        raise IndexError("no candidate pending")
    while True:
        for index, (item, future) in enumerate(pending):
            if future.done():
                del pending[index]
                return item, future
        wait([future for _, future in pending], return_when=FIRST_COMPLETED)


__all__ = ["compile_jobs", "next_ready"]
