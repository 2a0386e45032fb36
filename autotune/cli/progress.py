"""One progress printer for `run`, `remeasure` and the `run --gpus` campaign."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

PRINT_EVERY_S = 15.0  # a progress line this often when the stream is not a terminal


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--"
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        if seconds >= 3600
        else (f"{seconds // 60}m{seconds % 60:02d}s")
    )


def time_limit_note(short: int) -> str:
    """What a run's last line adds where its time limit left studies short of their budget."""
    if not short:
        return ""
    studies = "a study" if short == 1 else f"{short} studies"
    return f"; the time limit left {studies} short of the budget: the same command resumes"


def study_line(p) -> tuple[str, bool]:
    """A tuner's Progress as a line, and whether it stays (its study ended, or its best could
    not be confirmed: said once, not overwritten)."""
    best = f"{p.best_gflops:,.1f} GFlop/s" if p.best_gflops else "--"
    if p.event == "confirm":
        return f"{p.study}: measuring its best again to confirm it", False
    if p.event == "unconfirmed":
        return f"{p.study}: best not confirmed: {p.note}", True
    line = (
        f"{p.study}: {p.done}/{p.planned} evals, {p.failures} failed, best {best} | "
        f"run {p.campaign_done}/{p.campaign_planned}, elapsed "
        f"{format_duration(p.elapsed_s)}, ETA {format_duration(p.eta_s)}"
    )
    return line, p.event == "end"


def campaign_line(p) -> tuple[str, bool]:
    """A campaign's progress over its workers as a line, and whether every worker ended."""
    studies = (
        f"{p.studies_done}/{p.studies_total} studies done, "
        if getattr(p, "studies_total", None) is not None
        else ""
    )
    line = (
        f"campaign: {p.evaluations} evaluations recorded, {studies}{p.studies_held} studies "
        f"being tuned, {p.alive}/{p.workers} workers running, elapsed "
        f"{format_duration(p.elapsed_s)}"
    )
    return line, p.alive == 0


class ProgressPrinter:
    """One status line rewritten in place on a terminal; on a log, a line at each end and at
    most every 15 s otherwise (a line per event would bury the log)."""

    def __init__(
        self, describe: Callable[[Any], tuple[str, bool]] = study_line, stream=None
    ) -> None:
        self.describe = describe
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_print = float("-inf")
        self.width = 0

    def __call__(self, p) -> None:
        line, ended = self.describe(p)
        if self.tty:
            pad = max(0, self.width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self.width = len(line)
            if ended:
                self.stream.write("\n")
                self.width = 0
            self.stream.flush()
            return
        now = time.monotonic()
        if ended or now - self.last_print >= PRINT_EVERY_S:
            self.stream.write(line + "\n")
            self.stream.flush()
            self.last_print = now


__all__ = ["ProgressPrinter", "campaign_line", "format_duration", "study_line"]
