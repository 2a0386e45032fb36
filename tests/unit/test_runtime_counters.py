"""A plan's counters in the runtime: where they lie in the counters region, and that each
stream's region is zeroed when allocated, kept apart from its workspace and grown in stream
order; CuPy's allocator and runtime faked (no GPU)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("cupy")

from autotune.families.plan import KernelPlan, Launch  # noqa: E402
from autotune.runtime import dispatch, stream_memory  # noqa: E402
from autotune.runtime.plans import ALIGN_BYTES, Entry, counter_offsets  # noqa: E402
from autotune.runtime.stream_memory import StreamMemory  # noqa: E402

POOL_ROUND = 512  # CuPy's pool hands out multiples of this


class FakeCupy:
    """cp.cuda.alloc and the runtime calls the runtime makes, each one logged."""

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.next_ptr = 1 << 20
        runtime = SimpleNamespace(
            memsetAsync=lambda ptr, value, n, stream: self.log.append(
                ("memset", ptr, value, n, stream)
            ),
            streamSynchronize=lambda stream: self.log.append(("sync", stream)),
            getDevice=lambda: 0,
        )
        self.cuda = SimpleNamespace(alloc=self.alloc, runtime=runtime)

    def alloc(self, nbytes: int):
        size = -(-nbytes // POOL_ROUND) * POOL_ROUND
        ptr, self.next_ptr = self.next_ptr, self.next_ptr + size
        self.log.append(("alloc", ptr, size))
        return SimpleNamespace(ptr=ptr, mem=SimpleNamespace(size=size))


@pytest.fixture
def fake(monkeypatch) -> FakeCupy:
    fake = FakeCupy()
    monkeypatch.setattr(stream_memory, "cp", fake)
    monkeypatch.setattr(dispatch, "cp", fake)
    return fake


def _plan(counters) -> KernelPlan:
    return KernelPlan(
        Path("k.cu"), (), (Launch("k", (1, 1, 1), (32, 1, 1), ()),), counters=counters
    )


def test_a_plans_counters_start_at_offset_0_of_the_region_each_aligned():
    assert counter_offsets(_plan(())) == ((), 0)
    assert counter_offsets(_plan((("sk", 132),))) == ((("sk", 0),), 4 * 132)
    offsets, end = counter_offsets(_plan((("sk", 132), ("flags", 3), ("more", 64))))
    # 528 bytes of sk, rounded up to 3 x 256; flags' 12 to 256.
    assert offsets == (("sk", 0), ("flags", 3 * ALIGN_BYTES), ("more", 4 * ALIGN_BYTES))
    assert end == 4 * ALIGN_BYTES + 4 * 64


def test_a_streams_counters_are_zeroed_once_apart_from_its_workspace_and_grown_in_order(fake):
    memory = StreamMemory()
    region = memory.counters(0, 7, 12)
    assert fake.log == [("alloc", region, 512), ("memset", region, 0, 512, 7)]
    # Within what it holds: the same region, not zeroed again (every run left it zero).
    assert memory.counters(0, 7, 500) == region and len(fake.log) == 2
    # The workspace, which any plan overwrites, is other memory, and never zeroed.
    workspace = memory.workspace(0, 7, 100)
    assert workspace != region and fake.log[2:] == [("alloc", workspace, 512)]
    assert memory.workspace(0, 7, 512) == workspace
    # More than it holds: once the stream is done with the old one, a larger zeroed one.
    fake.log.clear()
    larger = memory.counters(0, 7, 2000)
    assert fake.log == [("sync", 7), ("alloc", larger, 2048), ("memset", larger, 0, 2048, 7)]
    # Another stream, or another device: a region of its own.
    assert memory.counters(0, 8, 12) not in (region, larger)
    assert memory.counters(1, 7, 12) not in (region, larger)


def _entry(log: list) -> Entry:
    def op(ptrs, stream):
        log.append((dict(ptrs), stream))

    return Entry(
        choice=None,
        device=0,
        epilogue="",
        out_shape=(1, 1, 1, 1),
        ops=(op,),
        pad=None,
        scratch=(("part", 0),),
        workspace_bytes=1024,
        fixed={},
        counters=(("sk", 0), ("flags", 2 * ALIGN_BYTES)),
        counter_bytes=2 * ALIGN_BYTES + 12,
    )


def test_a_launch_binds_counters_in_the_streams_region_or_the_callers(fake, tmp_path):
    rt = dispatch.Runtime(str(tmp_path / "none.db"), families=["implicit_gemm"])
    launched: list = []
    entry = _entry(launched)
    rt.launch(entry, 1, 2, 3, stream=5)
    ((ptrs, stream),) = launched
    allocs = [line for line in fake.log if line[0] == "alloc"]
    assert stream == 5 and len(allocs) == 2  # the workspace and the counters region
    region = next(ptr for _, ptr, size in allocs if ptr != ptrs["part"])
    assert (ptrs["sk"], ptrs["flags"]) == (region, region + 2 * ALIGN_BYTES)
    assert ("memset", region, 0, 1024, 5) in fake.log
    assert not ptrs["part"] <= region < ptrs["part"] + 1024  # scratch never holds counters
    # Given counters (a CUDA-graph capture's own, zeroed in the graph): the stream's are unused.
    fake.log.clear()
    rt.launch(entry, 1, 2, 3, stream=5, workspace=1 << 40, counters=1 << 41)
    ptrs, _ = launched[-1]
    assert (ptrs["part"], ptrs["sk"], ptrs["flags"]) == (
        1 << 40,
        1 << 41,
        (1 << 41) + 2 * ALIGN_BYTES,
    )
    assert fake.log == []
