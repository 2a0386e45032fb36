"""Where one block's time goes in a tc_wgmma launch: a copy of the kernel's text with clock
stamps added (compiled beside the original so that its headers resolve; kernels/tc_wgmma.cu
itself is not changed), run on random inputs after protocol 2's L2 flush.

Each block's first consumer thread stamps %clock64 at: its start, each of its first 16 steps'
data landed (the slot's `full` wait over), its first and last tile's main-loop end, and for its
last tile the staging tile free, the outputs staged and the stores issued, and its end (the
stores read). Stamps only write (a read of the stamps would stall the thread on a global load).
The producer thread stamps its first copy's issue and its exit; thread 0 the block's entry, in
%clock64 and %globaltimer (the blocks' placement in time). Prints, for the median launch of
--launches, the spread of each phase over the blocks in microseconds at the SM clock given
(--mhz, the clock nvidia-smi reads under the launches), beside the event time of the same
configuration without stamps (the stamps' own cost).

    python3 results/h200/20261203b/timeline.py --shape N=7,K=1,C=512,F=2048,B=32 --dtype bf16 \
        --config '{"BM":128,"BN":112,...}' [--config ...] [--mhz 1980] [--output stamps.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

import cupy as cp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201"))
from sk_trace import plan_arrays  # noqa: E402  (session 64's harness: the evaluator's arrays)

from autotune.families import get_family  # noqa: E402
from autotune.gpu.compiler import Compiler  # noqa: E402
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402
from autotune.model.problem import ConvProblem  # noqa: E402
from autotune.model.space import Config  # noqa: E402

SLOTS = 32
# The stamp slots of a block's row.
GT_ENTRY, CLK_ENTRY, START, LOOP_END, STAGE_FREE, STAGED, ISSUED, END = 0, 1, 2, 3, 4, 5, 6, 7
PRODUCER_FIRST, PRODUCER_END, LAST_LOOP_END, LAST_ISSUED, TILES, SMID = 8, 9, 10, 11, 12, 13
STEP0, STEPS = 16, 16  # step g's data landed, g < STEPS

PRELUDE = r"""
__device__ unsigned long long tl_stamps[2048][32];
__device__ __forceinline__ unsigned long long tl_clock()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
    return t;
}
#define TL(i) tl_stamps[blockIdx.x][i]
"""

# (anchor, replacement): each anchor occurs exactly once in the kernel's text.
PATCHES = [
    (
        "__device__ __forceinline__ void fence_proxy_async()",
        PRELUDE + "__device__ __forceinline__ void fence_proxy_async()",
    ),
    (
        "    const int tid = threadIdx.x;\n",
        "    const int tid = threadIdx.x;\n"
        "    if (tid == 0) {\n"
        "        unsigned long long gt;\n"
        '        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));\n'
        "        TL(0) = gt;\n"
        "        TL(1) = tl_clock();\n"
        "    }\n",
    ),
    (
        "        int g = 0;\n"
        "        for (int tile = first_tile; tile < dp_end; tile += tile_stride)",
        "        TL(8) = tl_clock();\n"
        "        int g = 0;\n"
        "        for (int tile = first_tile; tile < dp_end; tile += tile_stride)",
    ),
    (
        "#endif\n        return;\n#else\n        const int row0",
        "#endif\n        TL(9) = tl_clock();\n        return;\n#else\n        const int row0",
    ),
    (
        "    const bool leader = ctid % 128 == 0;\n"
        "#if RESIDUAL_TMA\n    if (leader) prefetch_map(&r_map);",
        "    const bool leader = ctid % 128 == 0;\n"
        "    if (ctid == 0) {\n"
        "        TL(2) = tl_clock();\n"
        "        unsigned sm;\n"
        '        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));\n'
        "        TL(13) = sm;\n"
        "    }\n"
        "#if RESIDUAL_TMA\n    if (leader) prefetch_map(&r_map);",
    ),
    (
        "            mbar_wait(full + 8 * s, (g / STAGES) & 1);\n#if !TMA",
        "            mbar_wait(full + 8 * s, (g / STAGES) & 1);\n"
        "            if (ctid == 0 && g < 16) TL(16 + g) = tl_clock();\n"
        "#if !TMA",
    ),
    (
        "        wgmma_wait<0>();\n        if (steps > 0 && leader) release_slot",
        "        wgmma_wait<0>();\n"
        "        if (ctid == 0) { if (done == 0) TL(3) = tl_clock(); TL(10) = tl_clock(); }\n"
        "        if (steps > 0 && leader) release_slot",
    ),
    (
        "    if (leader) bulk_wait_read<STAGING - 1>();\n"
        "    warpgroup_sync(cwg);\n#endif\n#if EPILOGUE",
        "    if (leader) bulk_wait_read<STAGING - 1>();\n    warpgroup_sync(cwg);\n"
        "    if (ctid == 0) TL(4) = tl_clock();\n#endif\n#if EPILOGUE",
    ),
    (
        "    fence_proxy_async();  // the generic-proxy writes, for the tensor-memory copies' "
        "async proxy\n    warpgroup_sync(cwg);\n    if (leader) {",
        "    fence_proxy_async();  // the generic-proxy writes, for the tensor-memory copies' "
        "async proxy\n    warpgroup_sync(cwg);\n    if (ctid == 0) TL(5) = tl_clock();\n"
        "    if (leader) {",
    ),
    (
        "tile_f0(next) Y_TAIL_ARG R_TAIL_ARG GEMM_EPI_ARGS);\n#else",
        "tile_f0(next) Y_TAIL_ARG R_TAIL_ARG GEMM_EPI_ARGS);\n"
        "        if (ctid == 0) {\n"
        "            if (done == 0) TL(6) = tl_clock();\n"
        "            TL(11) = tl_clock();\n"
        "            TL(12) = done + 1;\n"
        "        }\n#else",
    ),
    (
        "    if (leader) bulk_wait_read();\n#endif\n#else",
        "    if (leader) bulk_wait_read();\n    if (ctid == 0) TL(7) = tl_clock();\n#endif\n#else",
    ),
]


def traced_source(original: Path) -> str:
    text = original.read_text()
    for anchor, replacement in PATCHES:
        found = text.count(anchor)
        if found != 1:
            raise SystemExit(f"timeline: anchor found {found} times, not once: {anchor[:70]!r}")
        text = text.replace(anchor, replacement)
    return text


def timed_run(calls, flushes, start, stop) -> float:
    """One run of the bound launches in ms after `flushes` L2 flushes (protocol 2 flushes every
    second sample twice: the GPU alternates between two states from one flush to the next)."""
    for flush in flushes:
        flush()
    start.record()
    for fn, grid, block, args, smem in calls:
        fn(grid, block, args, shared_mem=smem)
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--config", action="append", required=True, help="JSON of the tunables")
    ap.add_argument("--launches", type=int, default=21)
    ap.add_argument("--mhz", type=float, default=1980.0, help="the SM clock, to read cycles as us")
    ap.add_argument("--output", type=Path, help="write the raw stamps as JSON here")
    ap.add_argument(
        "--baseline-source",
        type=Path,
        help="another text of the kernel (an earlier commit's) to time without stamps beside it",
    )
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    fields = dict(kv.split("=") for kv in args.shape.split(","))
    problem = ConvProblem(**{k: int(v) for k, v in fields.items()}, dtype=args.dtype, layout="NHWC")
    session = GpuSession(0)
    sm_count = session.info().sm_count
    compiler = Compiler(arch="sm_90")
    raw: dict[str, object] = {}
    with tempfile.TemporaryDirectory(dir=family.source_path.parent) as tmp:
        traced = Path(tmp).parent / f".{Path(tmp).name}_tc_wgmma_timeline.cu"
        traced.write_text(traced_source(family.source_path))
        baseline = None
        if args.baseline_source:
            baseline = Path(tmp).parent / f".{Path(tmp).name}_tc_wgmma_baseline.cu"
            baseline.write_text(args.baseline_source.read_text())
        try:
            for text in args.config:
                config = family.complete(Config.from_json(text))
                plan = dataclasses.replace(family.plan(problem, config), source=traced)
                compiled = compiler.compile(plan)
                module, functions = load_module(compiled.cubin, plan.entries, tmp, keep=True)
                opt_in_shared_memory(functions, plan.all_launches)
                arrays = plan_arrays(session, family.buffers(problem), plan)
                launches = tuple(
                    dataclasses.replace(lc, grid=lc.grid_on(sm_count)) for lc in plan.launches
                )
                calls = bind(prepare(launches, functions), arrays)
                stamps = cp.ndarray(
                    (2048, SLOTS), dtype=cp.uint64, memptr=module.get_global("tl_stamps")
                )
                flush = session._l2_flush()  # protocol 2's: a memset of twice the L2
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                runs = []
                for i in range(args.launches):
                    stamps.fill(0)
                    ms = timed_run(calls, (flush,) * (1 + i % 2), start, stop)
                    runs.append((ms, cp.asnumpy(stamps).tolist()))
                runs.sort(key=lambda run: run[0])
                ms, table = runs[len(runs) // 2]
                grid = calls[0][1][0]
                keys = ("BM", "BN", "WG", "STAGES", "MULTICAST", "MULTICAST_BLOCKS", "PERSISTENT")
                title = f"{problem.key}: " + ", ".join(f"{k}={config[k]}" for k in keys)
                sources = (None,) if baseline is None else (None, baseline)
                plain, *others = plain_ms(
                    family, problem, config, session, compiler, tmp, launches, sources
                )
                before = others[0] if others else None
                report(title, compiled, ms, [r[0] for r in runs], table[:grid], args.mhz, plain)
                if before is not None:
                    print(
                        f"\nwithout stamps, {args.baseline_source}'s text: {before * 1000:.2f} us;"
                        f" this text: {plain * 1000:.2f} us"
                    )
                raw[title] = {
                    "ms": ms,
                    "plain_ms": plain,
                    "baseline_ms": before,
                    "events_ms": [r[0] for r in runs],
                    "stamps": table[:grid],
                }
        finally:
            traced.unlink(missing_ok=True)
            if baseline is not None:
                baseline.unlink(missing_ok=True)
    if args.output:
        args.output.write_text(json.dumps({"shape": args.shape, "dtype": args.dtype, "runs": raw}))


def plain_ms(family, problem, config, session, compiler, tmp, launches, sources, runs=21):
    """The median event time of the configuration without stamps, for each kernel text in
    `sources` (None: the family's own), the texts' launches taking turns."""
    calls = []
    for source in sources:
        plan = family.plan(problem, config)
        if source is not None:
            plan = dataclasses.replace(plan, source=source)
        module, functions = load_module(compiler.compile(plan).cubin, plan.entries, tmp, keep=True)
        opt_in_shared_memory(functions, plan.all_launches)
        arrays = plan_arrays(session, family.buffers(problem), plan)
        calls.append(bind(prepare(launches, functions), arrays))
    flush = session._l2_flush()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = [[] for _ in sources]
    for i in range(runs):
        for k, bound in enumerate(calls):
            times[k].append(timed_run(bound, (flush,) * (1 + i % 2), start, stop))
    return [statistics.median(t) for t in times]


def report(title, compiled, ms, all_ms, rows, mhz, plain) -> None:
    us = lambda cycles: cycles / mhz  # noqa: E731
    gt0 = min(r[GT_ENTRY] for r in rows if r[GT_ENTRY])
    print(f"\n## {title}\n")
    print(
        f"{compiled.max_registers} registers, {compiled.spills} spill bytes; {len(rows)} blocks; "
        f"event time {ms * 1000:.2f} us, the median of {len(all_ms)} "
        f"({min(all_ms) * 1000:.2f}-{max(all_ms) * 1000:.2f}), {plain * 1000:.2f} without "
        f"stamps; cycles read at {mhz:g} MHz\n"
    )

    def spread(name, values):
        values = [v for v in values if v is not None]
        if not values:
            return
        q = statistics.quantiles(values, n=10) if len(values) > 1 else [values[0]] * 9
        print(
            f"| {name} | {len(values)} | {min(values):.2f} | {q[0]:.2f} | "
            f"{statistics.median(values):.2f} | {q[-1]:.2f} | {max(values):.2f} |"
        )

    def between(a, b):
        return [us(r[b] - r[a]) if r[a] and r[b] else None for r in rows]

    print("| phase (us) | blocks | min | p10 | median | p90 | max |\n|---|--:|--:|--:|--:|--:|--:|")
    entries = [(r[GT_ENTRY] - gt0) / 1e3 for r in rows]
    spread("entry, after the first block's (globaltimer)", entries)
    spread("entry to the consumers' start", between(CLK_ENTRY, START))
    spread("entry to the producer's first copy", between(CLK_ENTRY, PRODUCER_FIRST))
    spread("producer's first copy to step 0's data", between(PRODUCER_FIRST, STEP0))
    steps = [
        [us(r[STEP0 + g] - r[STEP0 + g - 1]) for g in range(1, STEPS) if r[STEP0 + g]] for r in rows
    ]
    for g in range(1, STEPS):
        gaps = [s[g - 1] if len(s) >= g else None for s in steps]
        spread(f"step {g - 1} to step {g}'s data", gaps)

    def first_tile_tail(r):  # the first tile's last step's data to its loop end
        before = [r[STEP0 + g] for g in range(STEPS) if 0 < r[STEP0 + g] < r[LOOP_END]]
        return us(r[LOOP_END] - max(before)) if before else None

    spread("the first tile's last step's data to its loop end", [first_tile_tail(r) for r in rows])
    spread("first tile's stores issued to the last tile's", between(ISSUED, LAST_ISSUED))
    spread("last tile's loop end to its staging tile free", between(LAST_LOOP_END, STAGE_FREE))
    spread("staging tile free to outputs staged", between(STAGE_FREE, STAGED))
    spread("staged to stores issued", between(STAGED, LAST_ISSUED))
    spread("last stores issued to their reads done (end)", between(LAST_ISSUED, END))
    spread("entry to end", between(CLK_ENTRY, END))
    spread("producer's exit after entry", between(CLK_ENTRY, PRODUCER_END))
    spread("tiles a block", [r[TILES] for r in rows])
    spans = [(r[GT_ENTRY] - gt0) / 1e3 + us(r[END] - r[CLK_ENTRY]) for r in rows if r[END]]
    if spans:
        print(f"\nlast block's end {max(spans):.2f} us after the first block's entry")


if __name__ == "__main__":
    main()
