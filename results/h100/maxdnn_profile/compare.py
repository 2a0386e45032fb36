"""Per layer: the committed best maxdnn config (BEFORE database) beside the fastest ones of a new
database, as % of the measured FMA peak (66,228 GFlop/s, protocol 2, H100)."""

import json
import sqlite3
import sys

PEAK = 66228.0


def rows(path):
    c = sqlite3.connect(path)
    q = (
        "select shape, config, gflops from evaluations where family = 'maxdnn' and protocol = 2 "
        "and status = 'OK' and gflops is not null"
    )
    out = {}
    for shape, config, g in c.execute(q):
        out.setdefault(shape, []).append((g, json.loads(config)))
    return out


def main(before_db, after_db, top=3):
    before, after = rows(before_db), rows(after_db)
    for shape in sorted(after):
        b = max(before.get(shape, [(0, {})]), key=lambda r: r[0])
        print(f"{shape}\n  before {b[0] / PEAK:.3f}  {json.dumps(b[1], sort_keys=True)}")
        for g, cfg in sorted(after[shape], key=lambda r: -r[0])[:top]:
            print(f"  after  {g / PEAK:.3f}  {json.dumps(cfg, sort_keys=True)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
