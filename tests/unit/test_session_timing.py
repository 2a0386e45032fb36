"""The timer's loop (GpuSession.time_runs) without a GPU, CuPy faked: what it queues for each
sample, in order. Every sample is flushed, every second one twice (timing.FLUSHES), counted
across the policy's batches, and the run lies between its sample's two events."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("cupy")

from autotune.gpu import session as session_module  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402
from autotune.gpu.timing import TimingPolicy  # noqa: E402

L2_BYTES = 50 << 20


class FakeCupy:
    """The calls time_runs makes, each queued one logged."""

    uint8 = "uint8"

    def __init__(self) -> None:
        self.log: list[str] = []
        log = self.log

        class Event:
            count = 0

            def __init__(self) -> None:
                Event.count += 1
                self.name = "start" if Event.count % 2 else "end"

            def record(self) -> None:
                log.append(self.name)

            def synchronize(self) -> None:
                pass

        runtime = SimpleNamespace(
            memsetAsync=lambda ptr, value, n, stream: log.append(f"flush {n >> 20} MiB")
        )
        self.cuda = SimpleNamespace(
            Event=Event,
            runtime=runtime,
            get_current_stream=lambda: SimpleNamespace(ptr=0),
            get_elapsed_time=lambda start, end: 1.0,
        )

    def empty(self, nbytes: int, dtype: str):
        return SimpleNamespace(data=SimpleNamespace(ptr=1 << 30), nbytes=nbytes)


def _session(monkeypatch) -> tuple[GpuSession, FakeCupy]:
    fake = FakeCupy()
    monkeypatch.setattr(session_module, "cp", fake)
    session = object.__new__(GpuSession)
    session._flush_buffer = None
    session._events = []
    session.sync = lambda: fake.log.append("sync")
    session._attribute_code = lambda code: L2_BYTES
    return session, fake


def test_every_second_sample_is_flushed_twice_across_the_batches(monkeypatch) -> None:
    session, fake = _session(monkeypatch)
    # Three samples, then (the minimum time not met) four more up to the maximum.
    policy = TimingPolicy(
        warmup=2,
        min_repeats=3,
        max_repeats=7,
        min_time_s=60.0,
        max_time_s=600.0,
        early_stop=None,
    )
    samples = session.time_runs(lambda: fake.log.append("run"), policy, rested=True)
    assert samples == [1.0] * 7
    assert fake.log[:3] == ["run", "run", "sync"]  # the warm-up, before any flush
    flush = "flush 256 MiB"  # twice the L2 would be less than the flush's minimum
    body = [e for e in fake.log[3:] if e != "sync"]
    sample = ["start", "run", "end"]
    once, twice = [flush, *sample], [flush, flush, *sample]
    assert body == once + twice + once + twice + once + twice + once
