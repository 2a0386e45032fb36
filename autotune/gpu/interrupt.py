"""SIGTERM taken as Ctrl-C: `timeout`, `kill` and cluster schedulers (Slurm sends SIGTERM before
SIGKILL) stop a run the way Ctrl-C does, so it releases its studies and records its end."""

from __future__ import annotations

import _thread
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing import resource_tracker
from types import FrameType

from autotune.gpu.child import kill_all

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM
# From the first signal to the end of the process. A clean stop (the evaluation in flight,
# claims released, the run's end recorded, the summary) takes a second or two; what takes
# longer is a child process or thread that the interpreter's exit waits for (it joins them).
WATCHDOG_S = 8.0
IMPORT_POLL_S = 0.01  # how often a stop deferred past a module's load looks whether it ended

# Every stop signal this process took, whichever handler took it: a SIGTERM that a block of
# terminate_as_interrupt turned into KeyboardInterrupt still decides the exit code.
STOP_SIGNALS: list[int] = []
_watchdog_enabled = False  # only in the command-line process: never in a library or test
_watchdog: threading.Timer | None = None


def enable_watchdog() -> None:
    """From now on a stop signal arms the exit watchdog (see arm_exit_watchdog)."""
    global _watchdog_enabled
    _watchdog_enabled = True


def arm_exit_watchdog(code: int, after_s: float = WATCHDOG_S) -> None:
    """End the process with `code` after_s seconds from now if it has not ended by then,
    killing its child processes first (a stuck one would outlive it). Once per process; a
    no-op unless enable_watchdog() was called."""
    global _watchdog
    if not _watchdog_enabled or _watchdog is not None:
        return

    def fire() -> None:
        with suppress(Exception):
            sys.stderr.write(f"autotune: still not stopped after {after_s:.0f} s; ending now\n")
            sys.stderr.flush()
            sys.stdout.flush()
        with suppress(Exception):
            for child in multiprocessing.active_children():
                child.kill()
        with suppress(Exception):
            kill_all()
        os._exit(code)

    _watchdog = threading.Timer(after_s, fire)
    _watchdog.daemon = True  # never itself a reason to wait
    _watchdog.start()


def watch_signals() -> None:
    """Arm the exit watchdog the moment SIGINT or SIGTERM arrives, from a thread of its own:
    Python runs a signal's handler in the main thread once that is back in Python code, which
    a long call into C (a compile, a wait on a database lock) can delay by seconds. Call from
    the main thread, after the handlers are installed (only handled signals are reported)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def watch() -> None:
        while True:
            for signum in os.read(read_end, 64):
                if signum in (signal.SIGINT, signal.SIGTERM):
                    arm_exit_watchdog(128 + signum)

    threading.Thread(target=watch, name="autotune-signal-watch", daemon=True).start()


@contextmanager
def signals_end_at_once() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM end the process at once with the shell's code (128 +
    the signal), as before the commands are loaded: for start-up work that has nothing to clean
    up and must not be broken off half-way. A KeyboardInterrupt raised inside an extension
    module's import (pandas, CuPy, matplotlib) leaves it half-initialised, and the process then
    fails with an ImportError or SystemError, or crashes at exit. Main thread only; the previous
    handlers return afterwards."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        signal.signal(signum, _end_now)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _end_now(signum: int, _frame: object) -> None:
    os._exit(128 + signum)


def stop_handler(received: list[int], finishing: Callable[[], bool] = lambda: False):
    """A SIGINT and SIGTERM handler that records each signal in `received` (and STOP_SIGNALS),
    arms the exit watchdog, and on the first raises KeyboardInterrupt in the main thread, unless
    `finishing()` says the stop is already under way. Never while a module is being loaded:
    the raise waits until the load has ended. A KeyboardInterrupt inside an extension module's
    import leaves it half-initialised (CI: a SIGTERM during `import cupy` ended the process with
    SIGINT's code, -2, rather than 143)."""
    deferred: list[int] = []  # the signal whose raise waits for a module's load to end

    def handler(signum: int, frame: FrameType | None) -> None:
        if not (deferred and signum in received):  # else the deferred one, sent again
            received.append(signum)
            if received is not STOP_SIGNALS:
                STOP_SIGNALS.append(signum)
            arm_exit_watchdog(exit_code(received))
        # Once: a second one would break off the clean stop the first began.
        if finishing() or (len(received) > 1 and not deferred):
            return
        if _importing(frame):
            if not deferred:
                deferred.append(signum)
                threading.Thread(
                    target=_send_after_import, args=(signum,), name="autotune-stop", daemon=True
                ).start()
            return
        deferred.clear()
        raise KeyboardInterrupt

    return handler


def _importing(frame: FrameType | None) -> bool:
    """Whether the frame is inside a module's loading (its code or an extension's init), not
    merely inside an import statement of a module already loaded (`from x import y` in a
    function runs importlib's Python code too, harmless to interrupt)."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_find_and_load" and code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _send_after_import(signum: int) -> None:
    """Deliver `signum` to the main thread's handler again once it loads no module."""
    main = threading.main_thread().ident
    while _importing(sys._current_frames().get(main)):
        time.sleep(IMPORT_POLL_S)
    _thread.interrupt_main(signum)  # the handler runs again, in the main thread


@contextmanager
def terminate_as_interrupt() -> Iterator[list[int]]:
    """Within the block SIGTERM raises KeyboardInterrupt in the main thread (see stop_handler);
    yields the list of signals received, so the caller can exit with the right code. The
    previous handler is put back afterwards. Python's default for SIGTERM ends the process at
    once, skipping every `finally`: a study stays claimed until its lease runs out and the run
    looks unfinished."""
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, stop_handler(received))
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(received: list[int]) -> int:
    """The exit code of an interrupted run: 143 after SIGTERM, else 130 (Ctrl-C)."""
    return EXIT_TERMINATED if signal.SIGTERM in received else EXIT_INTERRUPTED


@contextmanager
def children_ignore_interrupts() -> Iterator[None]:
    """Processes started in this block (the GPU worker, the compile pool's) never see Ctrl-C:
    a terminal sends it to the whole process group, and the parent, not each child, decides
    how a run stops (a worker killed mid-job would be recorded as a crash of its configuration,
    one killed while starting prints a traceback). SIGINT is blocked in this thread meanwhile: a
    child inherits the mask, through exec, from its first instruction; the parent's own Ctrl-C
    waits until the block ends rather than being lost."""
    # Starting spawn's resource tracker unblocks SIGINT after it (SIG_UNBLOCK, not a restore):
    # it must run before the block, not be started by the first child inside it.
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "WATCHDOG_S",
    "arm_exit_watchdog",
    "enable_watchdog",
    "exit_code",
    "children_ignore_interrupts",
    "signals_end_at_once",
    "stop_handler",
    "terminate_as_interrupt",
    "STOP_SIGNALS",
    "watch_signals",
]
