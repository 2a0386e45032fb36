"""Clusters against no clusters, from one store: every tc_wgmma evaluation with MULTICAST 1 or 2
beside its twin (the same configuration with MULTICAST = 0, same run), per shape; the geometric
mean of the ratios per MULTICAST; per shape the best with and without clusters beside cuDNN; and,
over the layers with C > 3, what the best without clusters and the best of all make of issue
36's per-layer and mean targets.

    python3 mc_pairs.py STORE.db [DTYPE]
"""

import json
import math
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
only = sys.argv[2] if len(sys.argv) > 2 else None
times: dict[str, dict[str, float]] = {}
for key, config, time_ms in db.execute(
    "SELECT problem_key, config, time_ms FROM evaluations "
    "WHERE family = 'tc_wgmma' AND status = 'OK' ORDER BY id"
):
    if only and f"dtype={only}," not in key:
        continue
    times.setdefault(key, {})[config] = time_ms  # the last of repeats: the latest run's
cudnn = {
    k: t
    for k, t in db.execute(
        "SELECT problem_key, time_ms FROM baselines WHERE library = 'cudnn' AND status = 'OK'"
    )
}


def twin(config: str) -> tuple[int, str]:
    c = json.loads(config)
    multicast = int(c.get("MULTICAST", 0))
    c["MULTICAST"] = 0
    return multicast, json.dumps(c, sort_keys=True, separators=(",", ":"))


ratios: dict[int, list[float]] = {1: [], 2: []}
speedups: dict[str, list[float]] = {"without clusters": [], "with": []}
print(
    "| shape | clusters best ms | without ms | ratio | MULTICAST | cuDNN ms | speedup before "
    "| after |"
)
print("|---|--:|--:|--:|--:|--:|--:|--:|")
for key, configs in times.items():
    plain = {twin(c)[1]: t for c, t in configs.items() if twin(c)[0] == 0}
    for c, t in configs.items():
        m, base = twin(c)
        if m and base in plain:
            ratios[m].append(t / plain[base])
    best_plain = min(plain.values(), default=None)
    clustered = [(t, twin(c)[0]) for c, t in configs.items() if twin(c)[0]]
    lib = cudnn.get(key)
    if best_plain and lib and int(key.split("C=")[1].split(",")[0]) > 3:
        # A layer without a clustered configuration (one filter tile) keeps its best.
        speedups["without clusters"].append(lib / best_plain)
        speedups["with"].append(lib / min([best_plain] + [t for t, _ in clustered]))
    if best_plain is None or not clustered:
        continue
    best_mc, mode = min(clustered)
    before = f"{lib / best_plain:.3f}" if lib else ""
    after = f"{lib / min(best_mc, best_plain):.3f}" if lib else ""
    print(
        f"| {key} | {best_mc:.4g} | {best_plain:.4g} | {best_mc / best_plain:.3f} | {mode} | "
        f"{lib if lib else ''} | {before} | {after} |"
    )
for m, r in ratios.items():
    if r:
        mean = math.exp(sum(map(math.log, r)) / len(r))
        faster = sum(x < 0.99 for x in r)
        print(
            f"\nMULTICAST={m}: {len(r)} pairs, time ratio geometric mean {mean:.3f}, "
            f"{faster} faster by over 1%, best {min(r):.3f}, worst {max(r):.3f}"
        )
for name, values in speedups.items():
    if values:
        mean = math.exp(sum(map(math.log, values)) / len(values))
        print(
            f"\nC > 3, best {name}: {sum(v >= 1.0 for v in values)} of {len(values)} layers at "
            f"least 1.0x cuDNN, geometric mean {mean:.3f}x"
        )
