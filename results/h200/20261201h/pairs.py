"""Each study's fastest configuration of two values of one tunable in a store, and cuDNN's time
for the study's layer beside them (session 65: pairs sharing the input against squares of four
sharing both tiles, MULTICAST 1 and 3; the last channel block at full and half width,
HALF_BLOCK 0 and 1).

    python3 pairs.py STORE [NAME A B]   (default: MULTICAST 1 3)
"""

import json
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
name, first, second = (
    (sys.argv[2], int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 2 else ("MULTICAST", 1, 3)
)
best: dict[str, dict[int, tuple[float, dict]]] = {}
for key, config, ms in db.execute(
    "select problem_key, config, time_ms from evaluations "
    "where family = 'tc_wgmma' and status = 'OK' and time_ms is not null"
):
    c = json.loads(config)
    mc = int(c.get(name, 0))
    if ms < best.setdefault(key, {}).get(mc, (float("inf"), None))[0]:
        best[key][mc] = (ms, c)
cudnn = dict(
    db.execute(
        "select problem_key, min(time_ms) from baselines where status = 'OK' group by problem_key"
    )
)
print(
    f"| layer | {name} = {first} ms | {name} = {second} ms | ratio | cuDNN ms | cuDNN / best "
    "| the second's tile |"
)
print("|---|--:|--:|--:|--:|--:|---|")
for key in sorted(best):
    b = best[key]
    if first not in b or second not in b:
        continue
    (p, _), (q, c) = b[first], b[second]
    ref = cudnn.get(key)
    tile = (
        f"{c['BM']}x{c['BN']} WG={c['WG']} s{c['STAGES']} pp{c['PINGPONG']} st{c['STORE_TMA']}"
        f" pers{c['PERSISTENT']} mc{c.get('MULTICAST', 0)}"
    )
    ratio = f"{ref / min(p, q):.3f}" if ref else ""
    print(f"| {key} | {p:.4f} | {q:.4f} | {q / p:.3f} | {ref or '':.4} | {ratio} | {tile} |")
