"""conv3d helper sweep on the GPU: ring configs vs the old bests at the conv3d shapes (not part of the package)."""
from __future__ import annotations

import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.session import TimingPolicy
from autotune.model.shapes import named_shapes
from autotune.model.space import Config
from autotune.store import Store
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from autotune.tuning.runners import GpuRunner

F = get_family("conv3d")
OLD = {
    "blog": dict(COARSEN=8, COARSEN_AXIS=1, TILE_X=32, TILE_Y=2, TILE_Z=8, USE_SMEM=1, VEC=2, Z_STEPS=4, RING=0),
    "cube64-k3": dict(COARSEN=2, COARSEN_AXIS=0, TILE_X=32, TILE_Y=4, TILE_Z=2, USE_SMEM=1, VEC=1, Z_STEPS=1, RING=0),
    "cube128-k7": dict(COARSEN=2, COARSEN_AXIS=1, TILE_X=32, TILE_Y=4, TILE_Z=4, USE_SMEM=1, VEC=2, Z_STEPS=2, RING=0),
}
def main():
    counts = dict(zip(("blog", "cube64-k3", "cube128-k7"), map(int, sys.argv[1].split(","))))
    deadline = time.monotonic() + float(sys.argv[2])
    out = Path(os.environ.get("OUT", "/tmp"))
    timing = TimingPolicy()  # the standard protocol: these results are stored
    with GpuEvaluator() as ev:
        comp = Compiler(arch=ev.device.arch, cache_dir=Path("/tmp/c3cache"))
        tuner = Tuner(GpuRunner(comp, ev), Store("results/autotune.db"), strategy="random", timing=timing, command="python3 .whl/c3_sweep_store.py " + " ".join(sys.argv[1:]) + "  # random ring configs + old bests, recorded")
        shapes = list(zip(("blog", "cube64-k3", "cube128-k7"), named_shapes("conv3d")))
        studies, _ = plan_studies([(F, p) for _, p in shapes], ev.limits)
        rng = random.Random(5)
        work = []
        for (name, p), st in zip(shapes, studies):
            ring = [c for c in st.space if int(c["RING"])]
            pick = rng.sample(ring, min(counts[name], len(ring)))
            work += [(name, st, Config.of(OLD[name]))] + [(name, st, c) for c in pick]
        t0 = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda w: comp.compile(w[1].family.plan(w[1].problem, w[2])), work))
        print(f"compiled {len(work)} in {time.monotonic() - t0:.0f}s", flush=True)
        rows = []
        for name, st, c in work:
            if time.monotonic() > deadline:
                print("deadline", flush=True); break
            m = tuner.evaluate(st, c)
            tuner.store.record(tuner.run_id, tuner.device_id, F.name, st.problem, c, m, st.problem.flops)
            rows.append(dict(shape=name, config=c.as_dict(), status=m.status.value, time_ms=m.time_ms,
                             gflops=(st.problem.flops / m.time_ms / 1e6) if m.time_ms else None,
                             regs=m.registers, spills=m.spills, err=(m.error or "")[:200]))
            r = rows[-1]
            if r["status"] != "OK":
                print("FAIL", name, c.as_dict(), r["status"], r["err"], flush=True)
        (out / "sweep.json").write_text(json.dumps(rows, indent=1))
        for name in counts:
            ok = sorted((r for r in rows if r["shape"] == name and r["status"] == "OK"), key=lambda r: r["time_ms"])
            old = [r for r in rows if r["shape"] == name and r["config"].get("RING") == 0]
            print(f"== {name}: {len(ok)} ok; old best now: {old[0]['time_ms'] * 1e3 if old and old[0]['time_ms'] else None} us")
            for r in ok[:8]:
                print(f"  {r['time_ms'] * 1e3:8.2f} us {r['gflops'] / 1e3:7.2f} TFLOP/s regs {r['regs']} {json.dumps(r['config'])}")


if __name__ == '__main__':
    main()
