"""A worker process of the local transport (tuning/processes.py): `python -m
autotune.tuning.worker_process`, started by the driver, one per GPU.

On stdin it reads pickled messages: first (session factory, compile processes, GPU index), then
calls (method, args) of "plan" or "tune"; on its stdout it answers each, and the opening, with
("ok", value) or ("error", exception). The end of its stdin ends it: it finishes its run and
exits 0. SIGINT (or SIGTERM) stops a study between two evaluations, as Ctrl-C stops `autotune
run`; it then answers that study as interrupted, finishes its run and exits 130 (143)."""

from __future__ import annotations

import os
import pickle
import signal
import sys
from typing import Any, BinaryIO

from autotune.gpu.compiler import compile_in_children
from autotune.gpu.interrupt import exit_code, stop_handler, terminate_as_interrupt

METHODS = ("plan", "tune")


def _send(out: BinaryIO, kind: str, value: Any) -> None:
    try:
        data = pickle.dumps((kind, value))
    except Exception:  # an exception that does not pickle: its text does
        data = pickle.dumps(("error", RuntimeError(f"{type(value).__name__}: {value}")))
    out.write(data)
    out.flush()


def serve(inbox: BinaryIO, out: BinaryIO) -> int:
    """Open the session the first message describes, answer calls until the end of input; the
    exit code."""
    factory, jobs, gpu = pickle.load(inbox)
    interrupted = False
    session = None
    with terminate_as_interrupt() as signals:
        # The driver's stop (SIGINT) as the command line takes it: once, never in a module's load.
        signal.signal(signal.SIGINT, stop_handler(signals))
        try:
            try:
                session = factory(jobs, _no_progress, gpu)
            except Exception as err:  # no GPU, a bad storage, nothing to tune: said once
                _send(out, "error", err)
                return 1
            _send(out, "ok", None)
            while True:
                try:
                    method, args = pickle.load(inbox)
                except EOFError:
                    break
                if method not in METHODS:
                    _send(out, "error", ValueError(f"unknown call {method!r}"))
                    continue
                try:
                    value = getattr(session, method)(*args)
                except Exception as err:  # the study's own error: the worker goes on
                    _send(out, "error", err)
                    continue
                _send(out, "ok", value)
                if getattr(value, "interrupted", False):
                    interrupted = True
        except KeyboardInterrupt:  # while opening or between calls
            interrupted = True
        finally:
            if session is not None:
                session.close()
    return exit_code(signals) if interrupted else 0


def _no_progress(progress: Any) -> None:
    """The tuner's progress hook: the driver reads progress from the store, and a stop comes as
    a signal, so nothing is done here."""


def main() -> None:
    compile_in_children()  # the driver's SIGINT, during a compile here, would end us with code 4
    # Answers go to the original stdout alone; anything else printed (the campaign's messages, a
    # library's) goes to stderr, the worker's log, instead of into the answers.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.exit(serve(sys.stdin.buffer, out))


if __name__ == "__main__":
    main()
