"""Warp-stall samples per SASS instruction from Nsight Compute's source page, for two profiles
side by side: the share of each opcode and the instructions that hold the most samples, with
the barrier a spin-wait branch returns to. Input: `ncu --import R --page source --csv
--print-source sass > R.sass.csv`. Usage: python3 ncu_stalls.py a.sass.csv b.sass.csv"""

import csv
import sys
from collections import Counter


def report(path):
    rows = list(csv.reader(open(path)))
    head, data = rows[1], rows[2:]
    samples, source = head.index("Warp Stall Sampling (All Samples)"), head.index("Source")
    executed = head.index("Instructions Executed")
    at = {row[0]: k for k, row in enumerate(data)}
    total = sum(int(row[samples]) for row in data)
    print(f"{path}: {total} samples over {len(data)} instructions")
    ops = Counter()
    for row in data:
        words = row[source].split()
        op = words[1] if words[0].startswith("@") else words[0]
        ops[op.split(".")[0]] += int(row[samples])
    for op, n in ops.most_common(8):
        print(f"  {op:10s} {n:6d} {100 * n / total:5.1f}%")
    for k in sorted(range(len(data)), key=lambda k: -int(data[k][samples]))[:6]:
        row = data[k]
        n = int(row[samples])
        line = f"  {n:5d} ({100 * n / total:4.1f}%) x{row[executed]}: {row[source].strip()}"
        target = at.get(row[source].split()[-1]) if "BRA" in row[source] else None
        if target is not None:  # a try_wait loop's branch back: name the barrier it waits on
            waits = [
                r[source].strip() for r in data[target - 2 : target + 2] if "TRYWAIT" in r[source]
            ]
            line += f"  <- {waits[-1] if waits else data[target][source].strip()}"
        print(line)


for p in sys.argv[1:]:
    report(p)
