"""Launch plans: entries in launch order, untimed setup/finish, scratch memory."""

from __future__ import annotations

from pathlib import Path

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
