"""Per-layer figures of the winograd family from a results database: time, effective GFlop/s
(direct count), GFlop/s of the arithmetic done, speedup over cuDNN, the chosen m, and the
measured error per m beside the direct families' (from the committed results/autotune.db).

    python3 results/h100/winograd/tables.py WINOGRAD_DB [DIRECT_DB]   # winograd.md, winograd.csv
"""

from __future__ import annotations

import csv
import json
import math
import sqlite3
import sys
from pathlib import Path

from autotune.families.winograd import transform_flops
from autotune.reports.views import named_layers

HERE = Path(__file__).parent
SETS = ("alexnet", "overfeat", "vgg16")
DIRECT = ("maxdnn", "implicit_gemm", "im2col_gemm", "chen_general", "smem_channels")


def main(db: str, direct_db: str) -> None:
    con = sqlite3.connect(db)
    best = {}
    for key, config, time_ms, scratch in con.execute(
        "select problem_key, config, time_ms, scratch_bytes from evaluations "
        "where family = 'winograd' and status = 'OK' and protocol = 2 order by time_ms desc"
    ):
        best[key] = (json.loads(config), time_ms, scratch)  # fastest last, so it stays
    cudnn = dict(
        con.execute(
            "select problem_key, time_ms from baselines where library = 'cudnn' "
            "and status = 'OK' and protocol = 2"
        )
    )
    rows = []
    for shape_set in SETS:
        for name, p in named_layers(shape_set):
            if p.K != 3 or p.key not in best:
                continue
            config, time_ms, scratch = best[p.key]
            m = int(config["OUT_TILE"])
            base = cudnn.get(p.key)
            rows.append({
                "set": shape_set, "layer": name, "shape": p.key, "m": m,
                "time_ms": round(time_ms, 4),
                "gflops": round(p.flops / time_ms / 1e6),
                "arithmetic_gflops": round(transform_flops(p, m) / time_ms / 1e6),
                "cudnn_ms": None if base is None else round(base, 4),
                "cudnn_gflops": None if base is None else round(p.flops / base / 1e6),
                "speedup": None if base is None else round(base / time_ms, 3),
                "scratch_mib": round(scratch / 2**20),
                "config": " ".join(f"{k}={v}" for k, v in sorted(config.items())),
            })  # fmt: skip
    with (HERE / "winograd.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    lines = ["## Best configuration per 3x3 layer (H100, protocol 2)", ""]
    head = ["set", "layer", "shape", "m", "time_ms", "gflops", "arithmetic_gflops",
            "cudnn_gflops", "speedup", "scratch_mib"]  # fmt: skip
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join("" if r[h] is None else f"{r[h]}" for h in head) + " |")
    for shape_set in SETS:
        ups = [r["speedup"] for r in rows if r["set"] == shape_set and r["speedup"]]
        if ups:
            geo = math.exp(sum(map(math.log, ups)) / len(ups))
            lines.append(f"\n{shape_set}: geometric mean speedup over cuDNN {geo:.3f} "
                         f"over {len(ups)} layers")  # fmt: skip

    lines += ["", "## Relative L2 error against float64 (every verified configuration)", ""]
    lines += ["| family | m | shapes | evaluations | median | max |", "|---|---|---|---|---|---|"]
    keys = sorted({r["shape"] for r in rows})
    marks = ",".join("?" * len(keys))
    errors: dict[tuple[str, str], list[float]] = {}
    for config, err in con.execute(
        f"select config, rel_error from evaluations where family = 'winograd' and status = 'OK' "
        f"and problem_key in ({marks})", keys,
    ):  # fmt: skip
        errors.setdefault(("winograd", str(json.loads(config)["OUT_TILE"])), []).append(err)
    wrong = dict(
        con.execute(
            "select json_extract(config, '$.OUT_TILE'), count(*) from evaluations where "
            f"family = 'winograd' and status = 'WRONG_RESULT' and problem_key in ({marks}) "
            "group by 1", keys,
        )
    )  # fmt: skip
    other = sqlite3.connect(direct_db)
    for family, err in other.execute(
        f"select family, rel_error from evaluations where status = 'OK' and rel_error is not null "
        f"and problem_key in ({marks})", keys,
    ):  # fmt: skip
        if family in DIRECT:
            errors.setdefault((family, "-"), []).append(err)
    for (family, m), errs in sorted(errors.items()):
        errs.sort()
        shapes = "the 3x3 layers above"
        lines.append(f"| {family} | {m} | {shapes} | {len(errs)} | {errs[len(errs) // 2]:.2e} | "
                     f"{errs[-1]:.2e} |")  # fmt: skip
    if wrong:
        lines.append("")
        lines.append("WRONG_RESULT (over the 1e-5 tolerance) per m: " + ", ".join(
            f"m={m}: {n}" for m, n in sorted(wrong.items())))  # fmt: skip
    (HERE / "winograd.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: tables.py WINOGRAD_DB [DIRECT_DB]")
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "results/autotune.db")
