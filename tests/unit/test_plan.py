"""Launch plans: entries in launch order, untimed setup/finish, scratch memory, counters."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autotune.families.plan import KernelPlan, Launch


def _launch(name: str) -> Launch:
    return Launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=())


def test_entries_cover_setup_timed_and_finish_once_each() -> None:
    plan = KernelPlan(
        Path("k.cu"),
        (),
        launches=(_launch("zero"), _launch("main")),
        setup=(_launch("to_chwn"),),
        finish=(_launch("from_chwn"), _launch("main")),
    )
    assert plan.entries == ("to_chwn", "zero", "main", "from_chwn")
    assert [launch.kernel for launch in plan.all_launches] == [
        "to_chwn",
        "zero",
        "main",
        "from_chwn",
        "main",
    ]


def test_scratch_bytes_count_fp32_elements() -> None:
    plan = KernelPlan(
        Path("k.cu"), (), (_launch("main"),), scratch=(("cols", (2, 75, 961)), ("t", (3,)))
    )
    assert plan.scratch_bytes == 4 * (2 * 75 * 961 + 3)
    assert KernelPlan(Path("k.cu"), (), (_launch("main"),)).scratch_bytes == 0


def test_counters_are_uint32_counted_apart_from_scratch_and_both_are_extra_memory() -> None:
    plain = KernelPlan(Path("k.cu"), (), (_launch("main"),), scratch=(("part", (2, 8)),))
    assert plain.counters == () and plain.counter_bytes == 0
    assert plain.extra_bytes == plain.scratch_bytes == 4 * 16
    plan = dataclasses.replace(plain, counters=(("sk_counters", 132), ("flags", 3)))
    assert plan.counter_bytes == 4 * (132 + 3)
    assert plan.scratch_bytes == 4 * 16  # scratch is scratch: the counters are not in it
    assert plan.extra_bytes == 4 * 16 + 4 * 135


def test_a_persistent_launch_is_capped_at_its_blocks_a_multiprocessor() -> None:
    launch = Launch("k", grid=(1000, 1, 4), block=(128, 1, 1), args=(), blocks_per_sm=1)
    assert launch.grid_on(132) == (132, 1, 4)
    assert launch.grid_on(2000) == (1000, 1, 4)  # fewer blocks than multiprocessors: as planned
    assert dataclasses.replace(launch, blocks_per_sm=2).grid_on(132) == (264, 1, 4)
    assert dataclasses.replace(launch, blocks_per_sm=0).grid_on(132) == (1000, 1, 4)


def test_a_cluster_launch_is_whole_clusters_and_so_is_its_persistent_cap() -> None:
    launch = Launch("k", grid=(1000, 1, 1), block=(384, 1, 1), args=(), blocks_per_sm=1, cluster=2)
    assert launch.grid_on(132) == (132, 1, 1)
    assert launch.grid_on(131) == (130, 1, 1)  # 65 pairs fit, not 65 and a half
    assert dataclasses.replace(launch, blocks_per_sm=0).grid_on(131) == (1000, 1, 1)
    with pytest.raises(ValueError, match="not whole clusters of 2"):
        Launch("k", grid=(999, 1, 1), block=(384, 1, 1), args=(), cluster=2)
