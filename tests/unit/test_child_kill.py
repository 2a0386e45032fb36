"""A worker process killed from several threads at once (the pool's own thread, and the one that
stops the pool on Ctrl-C) is ended once: no thread sees its socket closed twice."""

from __future__ import annotations

import threading

from autotune.gpu.child import Child


def _kill_at_once(child: Child, threads: int) -> list[BaseException]:
    """child.kill() from `threads` threads released together; what each raised."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def kill() -> None:
        start.wait()
        try:
            child.kill()
        except BaseException as err:  # noqa: BLE001 - the test is that nothing escapes
            errors.append(err)

    running = [threading.Thread(target=kill) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join(timeout=20)
    return errors


def test_killing_a_child_from_many_threads_at_once_raises_in_none() -> None:
    for _ in range(5):
        child = Child("autotune.gpu.child:serve", "time:sleep")
        child.conn.send((30,))  # busy: it answers nothing until killed
        assert _kill_at_once(child, 8) == []
        assert child.exit_code is not None and child.conn.closed
