"""Print the OFFSET_TABLE A/B pairs stored in a database (device-side helper, not in the package)."""
import json
import sqlite3
import sys

c = sqlite3.connect(sys.argv[1])
rows = c.execute("select problem_key, config, status, time_ms from evaluations").fetchall()
pairs = {}
for key, cfg, st, t in rows:
    d = json.loads(cfg); ot = d.pop("OFFSET_TABLE")
    pairs.setdefault((key, json.dumps(d, sort_keys=True)), {})[ot] = (st, t)
for (key, cfg), v in sorted(pairs.items()):
    a, b = v.get(0, ("-", None)), v.get(1, ("-", None))
    ratio = a[1] / b[1] if a[1] and b[1] else None
    print(f"{key:28s} {cfg:110s} table0 {a[0]} {a[1]}  table1 {b[0]} {b[1]}  speedup {ratio and round(ratio, 3)}")
