"""implicit_gemm GATHER_ROWS A/B on the stride-4 conv1 layers: the same tiles at 1, 2 and 4 rows
a warp (offset table on and off), timed under one policy. Usage:
python3 .whl/ig_gather_ab.py [limit_s]. One line per (shape, tile, table) with the times at
G = 1, 2, 4; every measurement in $OUT/ig_gather_ab.csv."""

import csv
import os
import sys
import time
from pathlib import Path

from autotune.families import FAMILIES
from autotune.gpu.compiler import Compiler
from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.session import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.model.space import Config
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner

OUT = Path(os.environ.get("OUT", "/tmp"))
LIMIT_S = float(sys.argv[1]) if len(sys.argv) > 1 else 200
TIMING = TimingPolicy(
    warmup=3, min_repeats=10, min_time_s=0.03, max_repeats=60, max_time_s=0.3, early_stop=None
)
SHAPES = [
    ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4),
    ConvProblem(N=56, K=11, C=3, F=96, B=128, stride=4),
]
TILES = [  # BM BN BK TM TN DB: the stored H100 bests first, then the earlier strided sweep's
    (64, 128, 16, 8, 8, 1),
    (32, 128, 8, 8, 8, 1),
    (64, 64, 16, 8, 8, 1),
    (64, 64, 32, 8, 8, 1),
    (128, 64, 16, 8, 8, 1),
    (64, 128, 8, 8, 8, 1),
    (128, 128, 8, 8, 8, 1),
    (128, 64, 8, 8, 8, 1),
    (64, 256, 8, 8, 8, 1),
    (64, 64, 16, 8, 8, 0),
]


def main() -> None:
    t0 = time.time()
    rows = []
    with GpuEvaluator() as ev:
        compiler = Compiler(arch=ev.device.arch, cache_dir=Path("/tmp/ig_gather_cubins"))
        tuner = Tuner(GpuRunner(compiler, ev), Store("/tmp/ig_gather_ab.db"), strategy="random", timing=TIMING)
        studies, _ = plan_studies([(FAMILIES["implicit_gemm"], p) for p in SHAPES], ev.limits)
        print(ev.device.name, flush=True)
        for table in (1, 0):
            for study in studies:
                for bm, bn, bk, tm, tn, db in TILES:
                    times = {}
                    for g in (1, 2, 4):
                        if time.time() - t0 > LIMIT_S:
                            break
                        c = Config.of(
                            dict(BM=bm, BN=bn, BK=bk, TM=tm, TN=tn, VEC=1, DOUBLE_BUFFER=db)
                            | dict(SPLIT_K=1, OFFSET_TABLE=table, GATHER_ROWS=g)
                        )
                        if not study.space.is_valid(c):
                            continue
                        m = tuner.evaluate(study, c)
                        ok = m.status is Status.OK
                        times[g] = m.time_ms if ok else None
                        gflops = study.problem.flops / (m.time_ms * 1e6) if ok else None
                        rows.append(
                            dict(shape=study.problem.key, **c.as_dict(), status=m.status.value)
                            | dict(time_ms=m.time_ms, gflops=gflops, registers=m.registers)
                            | dict(rel_error=m.rel_error, error=m.error[:200])
                        )
                    t1 = times.get(1)
                    ratio = " ".join(
                        f"G{g}={t:.4f}ms({t1 / t:.3f}x)" if t and t1 else f"G{g}={t}"
                        for g, t in times.items()
                    )
                    tile = f"{bm}x{bn}x{bk} {tm}x{tn} DB{db} T{table}"
                    print(study.problem.key, tile, ratio, flush=True)
    if rows:
        with open(OUT / "ig_gather_ab.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    best = {}
    for r in rows:
        if r["status"] == Status.OK.value:
            key = (r["shape"], r["GATHER_ROWS"])
            if key not in best or r["time_ms"] < best[key]["time_ms"]:
                best[key] = r
    for (shape, g), r in sorted(best.items()):
        print(f"BEST {shape} G={g}: {r['time_ms']:.4f} ms {r['gflops']:.0f} GFlop/s", flush=True)
    print("elapsed", round(time.time() - t0), "s", flush=True)


if __name__ == "__main__":
    main()
