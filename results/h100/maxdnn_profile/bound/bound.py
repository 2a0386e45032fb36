"""Issue 23: how fast maxdnn's main loop can run on the H100 when parts of it are taken away.

For each layer's stored best configuration (cp.async path, DOUBLE_BUFFER = 2), the kernel is
compiled four ways from edited copies of maxdnn.cu (the family's source is not changed):

  full        the kernel as tuned
  no_copy     the main loop without its per-tile cp.async copies (the first tile is copied once;
              the loop multiplies what shared memory holds): what the global -> shared traffic and
              its address arithmetic cost
  no_barrier  the copies kept, the per-tile wait and __syncthreads removed (the sums are wrong;
              the timing is the loop's without its synchronisation)
  fma_only    neither copies nor barriers: the register-tiled loop of LDS.128 and FFMA alone, plus
              the epilogue's stores: the ceiling of this loop structure on this GPU

Each is launched as the timed run of the plan (split-K's zero_fill included), 30 times after 3
warm-ups, CUDA events around each run, median reported, as a percentage of the FMA peak
that the stored efficiency divides by). No L2 flush between runs: the loop-only variants read
no global memory, and `full` here is within a few percent of the stored protocol-2 figure.

Usage (GPU machine, worktree root):
    python3 results/h100/maxdnn_profile/bound/bound.py BEST.csv > bound.md
where BEST.csv comes from
    autotune best --family maxdnn --format csv --columns shape,config,gflops,efficiency
"""

from __future__ import annotations

import csv
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

import cupy as cp

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import GpuSession
from autotune.model.parsing import parse_shape
from autotune.model.space import Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from drive import prepared  # noqa: E402  (the profile scripts' launch set-up)

COPY = (
    "        if (kt + 1 < kt_end) copy_tile(kt + 1, stage ^ 1);  // in flight during the multiply\n"
)
SYNC = "        copy_wait_all();\n        __syncthreads();\n"
FIRST = "    copy_tile(kt_begin, 0);\n"
# After the first tile's copy: wait for it once, so the loop-only variants start from a landed tile.
FIRST_WAITED = FIRST + "    copy_wait_all();\n    __syncthreads();\n"


def variants(text: str) -> dict[str, str]:
    for piece in (COPY, SYNC, FIRST):
        if text.count(piece) != 1:
            raise SystemExit(f"bound.py: maxdnn.cu changed; {piece.strip()!r} not found once")
    return {
        "full": text,
        "no_copy": text.replace(COPY, "").replace(FIRST, FIRST_WAITED),
        "no_barrier": text.replace(SYNC, "").replace(FIRST, FIRST_WAITED),
        "fma_only": text.replace(COPY, "").replace(SYNC, "").replace(FIRST, FIRST_WAITED),
    }


def time_plan(session, compiler, plan, problem) -> tuple[float, str]:
    compiled = compiler.compile(plan)
    res = compiled.resources.get("maxdnn")
    usage = f"{res.registers} regs, {res.spill_stores + res.spill_loads} B spilled" if res else ""
    run, arrays = prepared(session, compiled, plan, problem)
    times = []
    for i in range(33):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(cp.cuda.get_elapsed_time(start, stop))
    del arrays
    cp.get_default_memory_pool().free_all_blocks()
    return statistics.median(times), usage


def main(best_csv: str) -> None:
    family = get_family("maxdnn")
    defaults = {p.name: p.values[0] for p in family.load_space().parameters}
    session = GpuSession(0)
    compiler = Compiler(arch="sm_90")
    rows = list(csv.DictReader(open(best_csv)))
    names = ("full", "no_copy", "no_barrier", "fma_only")
    print("| layer | config | stored | " + " | ".join(names) + " |")
    print("|---|---|--:|" + "--:|" * len(names))
    with tempfile.TemporaryDirectory() as tmp:
        for row in rows:
            problem = parse_shape(row["shape"])
            peak_gflops = float(row["gflops"]) / float(row["efficiency"])
            config = {**defaults, **json.loads(row["config"])}
            plan = family.plan(problem, Config.of(config))
            sources = variants(plan.source.read_text())
            cells = []
            for name in names:
                path = Path(tmp) / f"{name}.cu"
                path.write_text(sources[name])
                # The copy sits elsewhere: its quoted include is found in the compiler's
                # include_dirs (the families' shared headers).
                variant = dataclasses.replace(plan, source=path)
                ms, usage = time_plan(session, compiler, variant, problem)
                gflops = problem.flops / ms / 1e6
                cells.append(f"{100 * gflops / peak_gflops:.1f}")
                print(
                    f"{row['shape']} {name}: {ms:.4f} ms, {gflops:,.0f} GFlop/s, {usage}",
                    file=sys.stderr,
                    flush=True,
                )
            short = (
                f"{config['BM']}x{config['BN']}/BK{config['BK']}/{config['TM']}x{config['TN']}"
                f"/split{config['SPLIT_K']}"
            )
            stored = 100 * float(row["efficiency"])
            print(
                f"| {row['shape']} | {short} | {stored:.1f} | " + " | ".join(cells) + " |",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1])
