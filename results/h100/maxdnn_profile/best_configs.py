"""Write {shape: config}, the fastest maxdnn config per shape in the databases, for drive.py."""

import json
import sqlite3
import sys

best = {}
for path in sys.argv[2:]:
    c = sqlite3.connect(path)
    q = (
        "select shape, config, gflops from evaluations where family = 'maxdnn' and protocol = 2 "
        "and status = 'OK' and gflops is not null"
    )
    for shape, config, g in c.execute(q):
        if g > best.get(shape, (0, None))[0]:
            best[shape] = (g, json.loads(config))


def fields(shape: str) -> str:
    items = json.loads(shape).items()
    return ",".join(f"{k}={v}" for k, v in items if k != "stride" or v != 1)


json.dump({fields(s): cfg for s, (g, cfg) in best.items()}, open(sys.argv[1], "w"), indent=1)
