"""Same tiles, loaded by cp.async and by TMA: each layer's stored best tc_wgmma configuration,
measured again as tuned, with its loads moved to the producer warpgroup in channel-block order
(PRODUCER = 1, C_OUTER = 1, L1_CACHE = 0: what the TMA path needs), and with those loads made
by TMA (TMA = 1). Timing protocol 2; every measurement is checked and stored like a tuning run's.

Usage, on the GPU from the repository root:
    python results/h100/tensor_cores/tma_ab.py STORE.db OUT.csv DTYPE [DTYPE ...]
"""

from __future__ import annotations

import csv
import dataclasses
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.evaluator import GpuEvaluator
from autotune.model.records import Status
from autotune.model.shapes import named_shapes
from autotune.model.space import Config
from autotune.store import Store
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from autotune.tuning.runners import GpuRunner

FAMILY = get_family("tc_wgmma")
SETS = ("alexnet", "overfeat", "vgg16")
TMA_NEEDS = {"PRODUCER": 1, "C_OUTER": 1, "L1_CACHE": 0}


def problems(dtype: str) -> list:
    every = [s for name in SETS for s in named_shapes(name)]
    shaped = [dataclasses.replace(p, dtype=dtype, layout="NHWC") for p in every]
    return list(dict.fromkeys(shaped))


def variants(best: Config) -> dict[str, Config]:
    stored = FAMILY.complete(best).as_dict()
    moved = stored | TMA_NEEDS | {"TMA": 0}
    return {
        "stored": Config.of(stored),
        "producer_c_outer": Config.of(moved),
        "tma": Config.of(moved | {"TMA": 1}),
    }


def main(store_path: str, out_path: str, dtypes: list[str]) -> None:
    store = Store(store_path)
    with GpuEvaluator() as evaluator:
        compiler = Compiler(arch=evaluator.device.arch)
        tuner = Tuner(GpuRunner(compiler, evaluator), store, command="tma_ab.py " + " ".join(dtypes))
        jobs = []
        for dtype in dtypes:
            studies, skipped = plan_studies(
                [(FAMILY, p) for p in problems(dtype)], evaluator.limits
            )
            assert not skipped, skipped
            for study in studies:
                stored = tuner._history(study)
                ok = [h for h in stored if h.status is Status.OK]
                if not ok:
                    print(f"{study.label}: nothing stored", flush=True)
                    continue
                best = min(ok, key=lambda h: h.time_ms).config
                measured = []  # a variant equal to an earlier one of this study is not rerun
                for name, config in variants(best).items():
                    if not study.space.is_valid(config) and int(config["STAGES"]) > 2:
                        # The producer's warpgroup and mbarriers: one stage fewer may fit.
                        config = Config.of(config.as_dict() | {"STAGES": int(config["STAGES"]) - 1})
                    if study.space.is_valid(config) and config not in measured:
                        measured.append(config)
                        jobs.append((dtype, study, name, config))
                    elif not study.space.is_valid(config):
                        print(f"{study.label} {name}: {config} is outside the space", flush=True)
        compiler.start_pool(os.cpu_count() or 1)
        started = time.time()
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(lambda j: compiler.compile(FAMILY.plan(j[1].problem, j[3])), jobs))
        compiler.stop_pool()
        print(f"{len(jobs)} plans compiled in {time.time() - started:.0f} s", flush=True)
        with open(out_path, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["dtype", "shape", "variant", "config", "status", "time_ms", "gflops"])
            for dtype, study, name, config in jobs:
                m = tuner.evaluate(study, config)
                flops = study.problem.flops
                store.record(
                    tuner.run_id, tuner.device_id, FAMILY.name, study.problem, config, m, flops
                )
                gflops = m.gflops(flops) if m.status is Status.OK else None
                row = [
                    dtype,
                    study.label,
                    name,
                    config.to_json(),
                    m.status.value,
                    m.time_ms,
                    gflops,
                ]
                out.writerow(row)
                fh.flush()
                print(
                    *row[:3],
                    m.status.value,
                    f"{gflops or 0:.0f} GFlop/s",
                    (m.error or "")[:200],
                    flush=True,
                )
        store.finish_run(tuner.run_id)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
