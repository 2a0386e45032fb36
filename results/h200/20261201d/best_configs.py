"""Each layer's best tc_wgmma configuration in one or more stores, as JSON lines (shape key,
dtype, config, the store's time), for desc_ab.py. A later store's best replaces an earlier's
for the same layer.

    python3 best_configs.py STORE.db [STORE.db ...] [--dtype bf16 --dtype tf32] > bests.jsonl
"""

import argparse
import json
import sqlite3

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("stores", nargs="+")
ap.add_argument("--dtype", action="append", default=[])
args = ap.parse_args()

best: dict[str, tuple[float, str]] = {}
for store in args.stores:
    found: dict[str, tuple[float, str]] = {}
    for key, config, time_ms in sqlite3.connect(store).execute(
        "SELECT problem_key, config, time_ms FROM evaluations "
        "WHERE family = 'tc_wgmma' AND status = 'OK'"
    ):
        dtype = key.split("dtype=")[1].split(",")[0]
        if args.dtype and dtype not in args.dtype:
            continue
        if key not in found or time_ms < found[key][0]:
            found[key] = (time_ms, config)
    best.update(found)
for key in sorted(best):
    time_ms, config = best[key]
    shape = ",".join(key.split(",dtype=")[0].split(","))
    dtype = key.split("dtype=")[1].split(",")[0]
    print(json.dumps({"shape": shape, "dtype": dtype, "config": json.loads(config), "ms": time_ms}))
