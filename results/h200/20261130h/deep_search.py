"""Calls 5 and 6: what 200 evaluations a layer found beyond the 3 configurations that call 1
re-timed (each layer's fastest of its earlier 60-evaluation searches, of the previous code),
all of this code. Per layer: the best of the re-timed, the best of the deeper search, their
ratio, where in the search the better one came (its evaluation number), and which tunables it
changed. Reads a store; measures nothing. From the checkout root:
    python3 results/h200/20261130h/deep_search.py STORE.db > deep_search.md"""

import json
import math
import sqlite3
import sys

CODE = "ceff275e9283bf50"  # tc_wgmma with the short step (621a0ab)
REMEASURE = "autotune remeasure"
DEEP = "autotune run --family tc_wgmma --shape"  # calls 5 and 6 (--budget 200)


def main(path: str) -> None:
    db = sqlite3.connect(path)
    rows = db.execute(
        "select e.problem_key, e.config, e.time_ms, r.command, e.id from evaluations e join runs r"
        " on e.run_id = r.id where e.family = 'tc_wgmma' and e.kernel_digest = ? and"
        " e.status = 'OK' and e.protocol = 2 order by e.id",
        (CODE,),
    ).fetchall()
    studies: dict[str, dict] = {}
    for key, config, time_ms, command, _ in rows:
        s = studies.setdefault(key, {"re": [], "deep": []})
        if command.startswith(REMEASURE):
            s["re"].append((time_ms, json.loads(config)))
        elif command.startswith(DEEP) and "--budget 200" in command:
            s["deep"].append((time_ms, json.loads(config)))
    print("| layer | re-timed best ms | 200-evaluation best ms | ratio | found at | changed |")
    print("|---|--:|--:|--:|--:|---|")
    ratios = []
    for key, s in studies.items():
        if not s["re"] or not s["deep"]:
            continue
        re_ms, re_cfg = min(s["re"], key=lambda t: t[0])
        deep_ms, deep_cfg = min(s["deep"], key=lambda t: t[0])
        best_ms = min(re_ms, deep_ms)
        at = next(i for i, (t, _) in enumerate(s["deep"], 1) if t == deep_ms)
        ratio = best_ms / re_ms
        ratios.append(ratio)
        changed = ", ".join(
            f"{k} {re_cfg[k]}->{v}" for k, v in deep_cfg.items() if re_cfg.get(k) != v
        )
        layer = key.replace(",layout=NHWC", "")
        print(f"| {layer} | {re_ms:.4f} | {deep_ms:.4f} | {ratio:.3f} | {at} | {changed} |")
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    better = sum(r <= 0.97 for r in ratios)
    print(
        f"\n{len(ratios)} layers; the best time over the re-timed best: geometric mean "
        f"{geomean:.3f}; {better} layers 3% faster or more."
    )


if __name__ == "__main__":
    main(sys.argv[1])
