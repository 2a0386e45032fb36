"""`autotune` as its own process on the synthetic GPU, for the interrupt tests: the real command
line (its entry, signal handling and watchdog), compiler, compile pool and store.

usage: python -m tests.synthetic_cli [--hold-child PIDFILE] AUTOTUNE-ARGUMENTS...
Each evaluation and each ceiling or baseline takes EVAL_S, so that a signal can land in the
middle of one. --hold-child starts a child process that ignores signals and never ends (its pid
in PIDFILE): the interpreter's exit waits for it, as it would for a stuck GPU or NVRTC worker.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # before the imports below, as `autotune` itself does
    from autotune.__main__ import exit_quietly_until_loaded

    exit_quietly_until_loaded()

import multiprocessing  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import autotune.gpu.evaluator  # noqa: E402
from autotune.cli.app import entry  # noqa: E402
from autotune.gpu.interrupt import children_ignore_interrupts  # noqa: E402
from tests.conftest import SyntheticEvaluator  # noqa: E402

EVAL_S = 0.05


class SlowSyntheticEvaluator(SyntheticEvaluator):
    def call(self, task, timeout_s: float):
        time.sleep(EVAL_S)
        return super().call(task, timeout_s)

    def evaluate(self, job, timeout_s: float):
        time.sleep(EVAL_S)
        return super().evaluate(job, timeout_s)


def _cost(defines: dict) -> float:
    return 1.0 + defines["BLOCK_X"] / 64 + defines["BLOCK_Y"] / 8 + defines["FILTER_IN_CONST"]


def _hold() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--hold-child"]:
        child = multiprocessing.get_context("spawn").Process(target=_hold)  # not a daemon
        with children_ignore_interrupts():  # from its first instruction, not once _hold runs
            child.start()
        Path(args[1]).write_text(str(child.pid))
        args = args[2:]
    autotune.gpu.evaluator.GpuEvaluator = lambda index=0: SlowSyntheticEvaluator(_cost)
    sys.argv = ["autotune", *args]
    entry()
