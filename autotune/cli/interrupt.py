"""SIGTERM taken as Ctrl-C: `timeout`, `kill` and cluster schedulers (Slurm sends SIGTERM before
SIGKILL) stop a run the way Ctrl-C does, so it releases its studies and records its end."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM


@contextmanager
def terminate_as_interrupt() -> Iterator[list[int]]:
    """Within the block SIGTERM raises KeyboardInterrupt in the main thread; yields the list of
    signals received, so the caller can exit with the right code. The previous handler is put
    back afterwards. Python's default for SIGTERM ends the process at once, skipping every
    `finally`: a study stays claimed until its lease runs out and the run looks unfinished."""
    received: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(received: list[int]) -> int:
    """The exit code of an interrupted run: 143 after SIGTERM, else 130 (Ctrl-C)."""
    return EXIT_TERMINATED if signal.SIGTERM in received else EXIT_INTERRUPTED


__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "exit_code", "terminate_as_interrupt"]
