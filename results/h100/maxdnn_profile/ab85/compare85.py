"""Per layer, every maxdnn configuration of the A/B database with its speed as % of the FMA peak
(66,228 GFlop/s), and the ratios that isolate each change: REG_USAGE_LEVEL 10 over 5 and
MIN_BLOCKS 3 over 1 (same configuration otherwise). Usage: python3 compare85.py AB.db"""

import json
import sqlite3
import sys

PEAK = 66228.0
KEYS = ("BM", "BN", "BK", "TM", "TN", "SPLIT_K", "MIN_BLOCKS", "REG_USAGE_LEVEL")

rows = sqlite3.connect(sys.argv[1]).execute(
    "select shape, config, gflops, registers, spills, status from evaluations "
    "where family = 'maxdnn' and protocol = 2"
).fetchall()
per = {}
for shape, config, gflops, regs, spills, status in rows:
    s = json.loads(shape)
    name = ",".join(f"{k}={v}" for k, v in s.items() if k != "stride" or v != 1)
    per.setdefault(name, {})[config] = (gflops, regs, spills, status)


def short(cfg):
    return " ".join(f"{k}={cfg.get(k)}" for k in KEYS)


def ratio(table, config, key, old, new):
    cfg = json.loads(config)
    if cfg.get(key) != new:
        return None
    base = json.dumps({**cfg, key: old}, sort_keys=True, separators=(",", ":"))
    if base in table and table[base][0] and table[config][0]:
        return table[config][0] / table[base][0]
    return None


for name in sorted(per):
    table = per[name]
    print(f"## {name}")
    for config, (g, regs, spills, status) in sorted(table.items(), key=lambda kv: -(kv[1][0] or 0)):
        pct = f"{100 * g / PEAK:5.1f} %" if g else "   -   "
        notes = []
        for key, old, new in (("REG_USAGE_LEVEL", 5, 10), ("MIN_BLOCKS", 1, 3)):
            r = ratio(table, config, key, old, new)
            if r:
                notes.append(f"{key} {old}->{new}: x{r:.3f}")
        print(f"  {pct}  {g or 0:8.0f} GF/s  regs={regs} spills={spills} {status:8s} "
              f"{short(json.loads(config))}  {'; '.join(notes)}")
