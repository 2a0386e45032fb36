"""Print and save the sweep's measurements, fastest first (helper, not part of the package)."""
import csv
import sqlite3
import sys

db, out = sys.argv[1], sys.argv[2]
rows = sqlite3.connect(db).execute(
    "select problem_key, config, status, gflops, time_ms, registers, spills from evaluations order by gflops desc").fetchall()
with open(out, "w", newline="") as f:
    w = csv.writer(f); w.writerow(["problem", "config", "status", "gflops", "time_ms", "regs", "spills"]); w.writerows(rows)
from collections import Counter

print(Counter(r[2] for r in rows))
for r in rows[:25]:
    print(r[0], r[1], r[2], round(r[3] or 0), r[5], r[6])
