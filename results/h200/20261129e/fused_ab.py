"""A/B of tc_wgmma's epilogue fetch (the epilogue's inputs a run of column pairs at a time,
before the run's stores, against each where it is used), from the stores of calls 1 (before)
and 2 (after) of calls.sh: ResNet-50's tf32 shapes as `tune-model --family tc_wgmma` tuned them
under each kernel digest (the two calls ran on two starts of the H200 machine). Per shape: each
kernel's best, and the geometric mean of after/before over the configurations both measured.
    python results/h200/20261129e/fused_ab.py BEFORE.db AFTER.db > results/h200/20261129e/fused_ab.md
"""

import math
import sqlite3
import sys


def latest(path: str) -> dict:
    """{(shape, config): ms} of tc_wgmma's latest kernel digest in the store, tf32."""
    con = sqlite3.connect(path)
    (digest,) = con.execute(
        "select kernel_digest from evaluations where family = 'tc_wgmma' order by id desc limit 1"
    ).fetchone()
    rows = con.execute(
        "select problem_key, config, time_ms from evaluations where family = 'tc_wgmma' "
        "and status = 'OK' and kernel_digest = ? and problem_key like '%dtype=tf32%'",
        (digest,),
    )
    return {(k, c): t for k, c, t in rows}


before, after = latest(sys.argv[1]), latest(sys.argv[2])
print("| shape | best before (us) | best after (us) | pairs | after / before, geomean of pairs |")
print("|---|--:|--:|--:|--:|")
for shape in sorted({k for k, _ in after}, key=lambda k: ("epilogue=bias_add" not in k, k)):
    b = {c: t for (k, c), t in before.items() if k == shape}
    a = {c: t for (k, c), t in after.items() if k == shape}
    common = set(a) & set(b)
    if not b or not common:
        continue
    g = math.exp(sum(math.log(a[c] / b[c]) for c in common) / len(common))
    print(f"| {shape} | {min(b.values()) * 1e3:.1f} | {min(a.values()) * 1e3:.1f} | {len(common)} | {g:.3f} |")
