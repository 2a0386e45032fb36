"""Session 69's both_sides.py with ours the tool's own pick: the store's best for the shape (as
`autotune best` reads it: the fastest by figure, the median of a configuration's first
measurement and its repeats, among the current code's evaluations) rather than the fastest
single evaluation that both_sides.py takes (session 64's `rest_ab.best_config`).

    python3 both_sides_best.py STORE --dtype fp16 --shape N=28,K=1,C=512,F=256,B=32 \
        [--shape ...] [--repeats 3] > both_sides_fp16.md

The store must hold one GPU model's evaluations of the kernel (every H200 store here does).
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

from autotune.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261202"))
import both_sides  # noqa: E402  (session 69's)


@cache
def _bests(store: str, digest: str):
    return Store(store).best(family="tc_wgmma", kernels={"tc_wgmma": digest})


def store_best(store: str, key: str, digest: str) -> str:
    bests = _bests(store, digest)
    rows = bests[bests.problem_key == key]
    if len(rows) != 1:
        raise SystemExit(f"both_sides_best.py: {len(rows)} bests of {key} with this kernel")
    return rows.iloc[0]["config"]


if __name__ == "__main__":
    both_sides.best_config = store_best
    both_sides.main()
