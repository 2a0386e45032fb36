"""The GPU worker's loop (gpu/evaluator.py worker_main) when its parent goes away mid-task: it
ends quietly instead of printing a BrokenPipeError traceback into the user's terminal (seen when
`bench kt-examples` stopped a script at its time limit)."""

from __future__ import annotations

import multiprocessing
import threading
import time

from autotune.gpu.evaluator import worker_main


class Session:
    """Stands in for the GPU session: what worker_main asks of it before any task."""

    def __init__(self, device_index: int) -> None:
        self.device_index = device_index

    def info(self):
        return {"name": "stand-in"}

    def limits(self):
        return {}


class SlowTask:
    def run(self, session):
        time.sleep(0.3)
        return "measured"


class FailingTask:
    def run(self, session):
        time.sleep(0.3)
        raise RuntimeError("broken kernel")


def _run_loop_and_leave(task) -> list[BaseException]:
    parent, child = multiprocessing.Pipe()
    raised: list[BaseException] = []

    def loop():
        try:
            worker_main(child, 0, f"{__name__}:Session")
        except BaseException as err:  # recorded for the assertion below
            raised.append(err)

    thread = threading.Thread(target=loop)
    thread.start()
    assert parent.recv()[0] == "ready"
    parent.send(task)
    parent.close()  # the parent stops waiting while the task runs
    thread.join(timeout=10)
    assert not thread.is_alive()
    return raised


def test_a_worker_whose_parent_left_ends_without_an_error():
    assert _run_loop_and_leave(SlowTask()) == []


def test_a_failed_task_whose_parent_left_ends_without_an_error():
    assert _run_loop_and_leave(FailingTask()) == []


def test_a_worker_answers_while_its_parent_waits():
    parent, child = multiprocessing.Pipe()
    thread = threading.Thread(target=worker_main, args=(child, 0, f"{__name__}:Session"))
    thread.start()
    assert parent.recv()[0] == "ready"
    parent.send(SlowTask())
    assert parent.recv() == ("done", "measured")
    parent.send(None)  # the loop's end
    thread.join(timeout=10)
    assert not thread.is_alive()
