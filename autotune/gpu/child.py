"""Worker processes that never import the caller's main module (the GPU worker, NVRTC's).

multiprocessing's spawn start re-runs the parent's main script in every child (to find the
functions a pickle names), so a script without an `if __name__ == "__main__":` guard, `python -c`,
`python -`, or a notebook cannot start one, and a function defined there cannot cross. These
children are `python -m autotune.gpu.child`: the first message names a function inside an
importable package and its arguments; every later message is data (plans, cubins, arrays'
descriptions, measurements). The caller's own code (a verify, a restriction, a metric) is
called in the caller's process, never here.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import autotune

# Every child still running, for the exit watchdog (interrupt.py), which kills them last.
_LIVE: weakref.WeakSet[Child] = weakref.WeakSet()


class ChildEnded(RuntimeError):
    """The child process ended (killed, crashed or stopped) before it answered."""


def resolve(target: str) -> Callable:
    """The function named "package.module:function"."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


class Child:
    """One child process running `target(connection, *args)`, connected by a socket pair."""

    def __init__(self, target: str, *args: Any) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        # The child must import autotune as this process did, even from a checkout that is on
        # sys.path only (a notebook's sys.path.insert): its root goes first on PYTHONPATH.
        root = str(Path(autotune.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        # SIGINT stays blocked in the child from its first instruction (the mask survives exec):
        # a terminal's Ctrl-C goes to the whole process group, and the parent decides how a run
        # stops; a worker killed mid-job would be recorded as a crash of its configuration.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autotune.gpu.child", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            theirs.close()
        self.conn = Connection(ours.detach())
        # kill() runs on the pool's thread and on the one that stops the pool (an interrupt):
        # the socket is closed once, under this lock (closed twice, the second close raised
        # EBADF in the pool's thread and printed a traceback on Ctrl-C).
        self._closing = threading.Lock()
        # The parent's path (after the package root) lets the child import a session class of
        # a test suite or a user's package by name; nothing is imported by file path.
        self.conn.send((list(sys.path), target, args))
        _LIVE.add(self)

    @property
    def exit_code(self) -> int | None:
        return self.proc.poll()

    def kill(self) -> None:
        """End the process at once and wait for it (idempotent)."""
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with self._closing:
            if not self.conn.closed:
                self.conn.close()
        _LIVE.discard(self)

    def close(self, timeout_s: float = 10.0) -> None:
        """Ask the child to finish (a None message), then make sure it has."""
        try:
            self.conn.send(None)
            self.proc.wait(timeout=timeout_s)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.kill()


# Children started ahead of a pool (start_ahead), by the function they serve, not yet taken.
_AHEAD: dict[str, list[Child]] = {}
_AHEAD_LOCK = threading.Lock()


def start_ahead(function: str, count: int) -> None:
    """Have `count` children serving `function` starting now; the next pools of that function
    take them before starting their own. A caller that will need them soon starts them while it
    waits on something else (tune_kernel, on the GPU worker's boot): a child's start and its
    imports take a fifth of a second. Children that no pool takes end with this process."""
    with _AHEAD_LOCK:
        waiting = [c for c in _AHEAD.get(function, []) if c.exit_code is None]
        while len(waiting) < count:
            waiting.append(Child("autotune.gpu.child:serve", function))
        _AHEAD[function] = waiting


def _started_ahead(function: str) -> Child | None:
    with _AHEAD_LOCK:
        waiting = _AHEAD.get(function, [])
        while waiting:
            child = waiting.pop()
            if child.exit_code is None:
                return child
            child.kill()
    return None


def kill_all() -> None:
    """Kill every child still running (the exit watchdog's last act)."""
    for child in list(_LIVE):
        try:
            child.proc.kill()
        except OSError:
            pass


def serve(conn: Connection, function: str) -> None:
    """A child's loop that calls `function(*arguments)` for each message and answers
    ("ok", value) or ("error", exception); a None message or a closed socket ends it."""
    call = resolve(function)
    while True:
        try:
            arguments = conn.recv()
        except (EOFError, OSError):
            return
        if arguments is None:
            return
        try:
            answer: tuple[str, Any] = ("ok", call(*arguments))
        except Exception as err:
            answer = ("error", err)
        try:
            conn.send(answer)
        except (OSError, ValueError):
            return


class ChildPool:
    """Calls one function in up to `processes` children, one call at a time each, started on
    first use; submit() returns a Future. A child that ends mid-call fails that call with
    ChildEnded and is replaced for the next; stop() kills them all without waiting."""

    def __init__(self, function: str, processes: int) -> None:
        self.function = function
        self.processes = processes
        self._calls: SimpleQueue = SimpleQueue()
        self._stopped = False
        self._lock = threading.Lock()
        self._children: list[Child] = []
        self._threads: list[threading.Thread] = []

    def submit(self, *arguments: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._stopped:
                raise ChildEnded("the pool was stopped")
            self._calls.put((arguments, future))
            if len(self._threads) < self.processes:
                thread = threading.Thread(
                    target=self._dispatch, name="autotune-child-pool", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _dispatch(self) -> None:
        child: Child | None = None
        try:
            while True:
                item = self._calls.get()
                if item is None or self._stopped:
                    if item is not None:
                        item[1].cancel()
                    return
                arguments, future = item
                if not future.set_running_or_notify_cancel():
                    continue
                if child is None:
                    child = self._start()
                    if child is None:
                        future.set_exception(ChildEnded("the pool was stopped"))
                        return
                try:
                    child.conn.send(arguments)
                    kind, value = child.conn.recv()
                except (EOFError, OSError, ValueError):
                    code = child.exit_code
                    child.kill()
                    with self._lock:
                        if child in self._children:
                            self._children.remove(child)
                    child = None
                    future.set_exception(ChildEnded(f"the worker process ended (exit code {code})"))
                    continue
                if kind == "ok":
                    future.set_result(value)
                else:
                    future.set_exception(value)
        finally:
            if child is not None:
                child.close(timeout_s=2.0)

    def _start(self) -> Child | None:
        with self._lock:
            if self._stopped:
                return None
            child = _started_ahead(self.function)
            if child is None:
                child = Child("autotune.gpu.child:serve", self.function)
            self._children.append(child)
            return child

    def stop(self) -> None:
        """Kill every child (a call in flight fails with ChildEnded; queued ones are cancelled)
        and wait for the dispatching threads, which end once their child's socket closes."""
        with self._lock:
            self._stopped = True
            children, self._children = self._children, []
            threads = list(self._threads)
        for child in children:
            child.kill()
        for _ in threads:
            self._calls.put(None)
        for thread in threads:
            thread.join(timeout=10)
        while not self._calls.empty():
            item = self._calls.get()
            if item is not None:
                item[1].cancel()


def _main(fd: int) -> None:
    conn = Connection(fd)
    try:
        path, target, args = conn.recv()
    except (EOFError, OSError):
        return
    sys.path.extend(p for p in path if p not in sys.path)
    resolve(target)(conn, *args)


if __name__ == "__main__":
    _main(int(sys.argv[1]))
