"""Where a tc_wgmma grid's time goes, block by block: the kernel's text with %globaltimer stamps
added (a copy, compiled beside the original so that its headers resolve; kernels/tc_wgmma.cu
itself is not changed), run on random inputs after an L2 flush, as protocol 2 times it.

Each block's first consumer thread stamps: its start, its first tile's data landed, the end of
its whole-wave tiles, and, for each stream-K share, the end of its main loop, of its fix-up
(partial sums stored, or the others' added in) and of its store. The producer stamps when it
has issued its last copy. Prints the phases' spread over the blocks and the slowest block's
timeline, for the median of --launches traced launches.

    python3 results/h200/20261201/sk_trace.py --shape N=14,K=1,C=1024,F=256,B=32 --dtype bf16 \
        --config '{"BM":128,"BN":128,...}' [--config ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
from pathlib import Path

import cupy as cp

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare
from autotune.gpu.session import GpuSession
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

SLOTS = 32
# Stamp slots: what each block's first consumer (or producer) thread records.
ENTRY, START, FIRST_DATA, WAVES_END, PRODUCER_END, END = 0, 1, 2, 3, 4, 5
# Stream-K share p (p < 2) of a block, at 6 + 10p + one of these: its main loop's end, then the
# fix-up's steps (the look at the counter, the partial sums stored, the warpgroup's barrier, the
# count, the others' partial sums added), the fix-up's end, the tile's store, and (r, k0, k1).
SHARE_MARKS = (
    "loop",
    "look",
    "partials stored",
    "barrier",
    "counted",
    "others added",
    "fix-up",
    "tile stored",
)
INFO = 8


def slot(p: int, mark: str) -> int:
    return 6 + 10 * p + (INFO if mark == "info" else SHARE_MARKS.index(mark))


PRELUDE = r"""
__device__ unsigned long long sk_trace[1024][32];
__device__ int sk_share[1024];  // the share a block's first consumer thread is in
__device__ __forceinline__ unsigned long long gtimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define STAMP(i) do { if (ctid == 0) sk_trace[blockIdx.x][i] = gtimer(); } while (0)
#define SHARE_STAMP(k) do { if (ctid == 0 && sk_share[blockIdx.x] < 2) \
    sk_trace[blockIdx.x][6 + 10 * sk_share[blockIdx.x] + (k)] = gtimer(); } while (0)
"""

# (anchor, replacement): each anchor must occur exactly once (or `count` times).
PATCHES = [
    (
        "__device__ __forceinline__ void fence_proxy_async()",
        PRELUDE + "__device__ __forceinline__ void fence_proxy_async()",
        1,
    ),
    (
        "    const int tid = threadIdx.x;\n\n    // This block's share",
        "    const int tid = threadIdx.x;\n"
        "    if (tid == 0) sk_trace[blockIdx.x][0] = gtimer();\n"
        "\n"
        "    // This block's share",
        1,
    ),
    (
        "        }\n#endif\n        return;\n#else\n        const int row0",
        "        }\n#endif\n        sk_trace[blockIdx.x][4] = gtimer();\n        return;\n#else\n"
        "        const int row0",
        1,
    ),
    (
        "    const bool leader = ctid % 128 == 0;\n#if RESIDUAL_TMA",
        "    const bool leader = ctid % 128 == 0;\n"
        "    STAMP(1);\n"
        "    int piece = 0;\n"
        "#if RESIDUAL_TMA",
        1,
    ),
    (
        "            mbar_wait(full + 8 * s, (g / STAGES) & 1);\n#if !TMA",
        "            mbar_wait(full + 8 * s, (g / STAGES) & 1);\n"
        "            if (g == 0) STAMP(2);\n"
        "#if !TMA",
        1,
    ),
    (
        "                mbar_wait(full + 8 * s, (g / STAGES) & 1);\n"
        "                mma_step(acc, base + s * STAGE_BYTES, cwg, kt);",
        "                mbar_wait(full + 8 * s, (g / STAGES) & 1);\n"
        "                if (g == 0) STAMP(2);\n"
        "                mma_step(acc, base + s * STAGE_BYTES, cwg, kt);",
        1,
    ),
    (
        "#if STREAM_K\n    // The stream-K steps",
        "    STAMP(3);\n#if STREAM_K\n    // The stream-K steps",
        1,
    ),
    (
        "            if (leader) mbar_arrive(empty + 8 * ((g - 1) % STAGES));\n"
        "            if (!sk_gather(acc, sk, r, k0, sk_partials, sk_counters, ctid, "
        "cwg)) continue;",
        "            if (leader) mbar_arrive(empty + 8 * ((g - 1) % STAGES));\n"
        "            if (ctid == 0) sk_share[blockIdx.x] = piece;\n"
        "            SHARE_STAMP(0);\n"
        "            if (ctid == 0 && piece < 2) sk_trace[blockIdx.x][6 + 10 * piece + 8] = "
        "((unsigned long long)r << 16) | (k0 << 8) | k1;\n"
        "            const bool stores = sk_gather(acc, sk, r, k0, sk_partials, sk_counters, "
        "ctid, cwg);\n"
        "            SHARE_STAMP(6);\n"
        "            if (!stores) { ++piece; continue; }",
        1,
    ),
    (
        "            store_tile(acc, y, m0, f0, ctid, cwg GEMM_EPI_ARGS);\n"
        "#endif\n"
        "        }\n"
        "    }\n"
        "#endif",
        "            store_tile(acc, y, m0, f0, ctid, cwg GEMM_EPI_ARGS);\n#endif\n"
        "            SHARE_STAMP(7);\n            ++piece;\n        }\n    }\n#endif",
        1,
    ),
    # Inside the fix-up (sk_gather): after the look, the partial sums' stores, the barrier, the
    # count, and the others' partial sums added.
    (
        "    bool finishes = k0 == 0 && warpgroup_any(cwg, "
        "leader && load_acquire(counter) == others);\n",
        "    bool finishes = k0 == 0 && warpgroup_any(cwg, "
        "leader && load_acquire(counter) == others);\n"
        "    SHARE_STAMP(1);\n",
        1,
    ),
    (
        "        sk_store(acc, sk_slot(partials, sk, blockIdx.x, r, cwg), lane);\n"
        "        warpgroup_sync(cwg);\n",
        "        sk_store(acc, sk_slot(partials, sk, blockIdx.x, r, cwg), lane);\n"
        "        SHARE_STAMP(2);\n"
        "        warpgroup_sync(cwg);\n        SHARE_STAMP(3);\n",
        1,
    ),
    (
        "        finishes = warpgroup_any(cwg, leader && add_acq_rel(counter, 1u) == others);\n",
        "        finishes = warpgroup_any(cwg, leader && add_acq_rel(counter, 1u) == others);\n"
        "        SHARE_STAMP(4);\n",
        1,
    ),
    (
        "        if (block != (int)blockIdx.x) sk_add(acc, sk_slot(partials, sk, block, r, cwg), "
        "lane);\n"
        "    return true;",
        "        if (block != (int)blockIdx.x) sk_add(acc, sk_slot(partials, sk, block, r, cwg), "
        "lane);\n"
        "    SHARE_STAMP(5);\n    return true;",
        1,
    ),
    (
        "    if (leader) bulk_wait_read();\n#endif\n#else",
        "    if (leader) bulk_wait_read();\n#endif\n    STAMP(5);\n#else",
        1,
    ),
]


def traced_source(original: Path) -> str:
    text = original.read_text()
    for anchor, replacement, count in PATCHES:
        found = text.count(anchor)
        if found != count:
            raise SystemExit(f"sk_trace: anchor found {found} times, not {count}: {anchor[:70]!r}")
        text = text.replace(anchor, replacement)
    return text


def plan_arrays(session, buffers, plan) -> dict[str, object]:
    """A run's device arrays, as the evaluator makes them: fresh inputs, NaN outputs, zeroed
    scratch (the partial sums) and counters."""
    arrays = session.fresh_inputs(buffers, seed=1)
    for name, shape in buffers.outputs:
        arrays[name] = session.poisoned(shape, buffers.dtype)
    for name, shape in plan.scratch:
        arrays[name] = cp.zeros(shape, dtype=cp.float32)
    arrays.update(session.zeroed_counters(plan))
    return arrays


def timed_run(calls, flush, start, stop) -> float:
    """One run of the bound launches in ms, as protocol 2 times it: the L2 flushed first, CUDA
    events around the launches alone."""
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
    ap.add_argument(
        "--sk-blocks",
        type=int,
        action="append",
        default=[],
        help="also run each stream-K config with at most this many sharing blocks",
    )
    ap.add_argument("--launches", type=int, default=9)
    ap.add_argument("--output", type=Path, help="write the raw stamps as JSON here")
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    fields = dict(kv.split("=") for kv in args.shape.split(","))
    problem = ConvProblem(**{k: int(v) for k, v in fields.items()}, dtype=args.dtype, layout="NHWC")
    session = GpuSession(0)
    sm_count = session.info().sm_count
    compiler = Compiler(arch="sm_90")
    raw: dict[str, object] = {}
    with tempfile.TemporaryDirectory(dir=family.source_path.parent) as tmp:
        traced = Path(tmp).parent / f".{Path(tmp).name}_tc_wgmma_trace.cu"
        traced.write_text(traced_source(family.source_path))
        try:
            variants = []
            for text in args.config:
                config = family.complete(Config.from_json(text))
                plan = dataclasses.replace(family.plan(problem, config), source=traced)
                variants.append((config, plan, None))
                for blocks in args.sk_blocks if config["STREAM_K"] else ():
                    defines = tuple(
                        (k, blocks if k == "STREAM_K_BLOCKS" else v) for k, v in plan.defines
                    )
                    variants.append((config, dataclasses.replace(plan, defines=defines), blocks))
            for config, plan, blocks in variants:
                compiled = compiler.compile(plan)
                module, functions = load_module(compiled.cubin, plan.entries, tmp, keep=True)
                opt_in_shared_memory(functions, plan.all_launches)
                arrays = plan_arrays(session, family.buffers(problem), plan)
                launches = tuple(
                    dataclasses.replace(lc, grid=lc.grid_on(sm_count)) for lc in plan.launches
                )
                calls = bind(prepare(launches, functions), arrays)
                trace = module.get_global("sk_trace")
                stamps = cp.ndarray((1024, SLOTS), dtype=cp.uint64, memptr=trace)
                flush = session._l2_flush()  # protocol 2's: a memset of twice the L2
                runs = []
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                for _ in range(args.launches):
                    stamps.fill(0)
                    ms = timed_run(calls, flush, start, stop)
                    runs.append((ms, cp.asnumpy(stamps).tolist()))
                left = [n for n, _ in plan.counters if int(cp.count_nonzero(arrays[n]))]
                runs.sort(key=lambda run: run[0])
                ms, table = runs[len(runs) // 2]
                grid = calls[0][1][0]
                keys = ("BM", "BN", "WG", "STAGES", "STORE_TMA", "GEMM_1X1", "STREAM_K")
                title = f"{problem.key}: " + ", ".join(f"{k}={config[k]}" for k in keys)
                if blocks:
                    title += f", at most {blocks} sharing blocks"
                report(title, compiled, ms, table[:grid], left)
                raw[title] = {"ms": ms, "stamps": table[:grid], "events_ms": [r[0] for r in runs]}
        finally:
            traced.unlink(missing_ok=True)
    if args.output:
        args.output.write_text(json.dumps({"shape": args.shape, "dtype": args.dtype, "runs": raw}))


def report(title, compiled, ms, rows, counters_left) -> None:
    t0 = min(r[ENTRY] for r in rows if r[ENTRY])
    us = lambda t: (t - t0) / 1000.0  # noqa: E731
    print(f"\n## {title}; {compiled.max_registers} registers, {compiled.spills} spill bytes")
    print(
        f"event time {ms * 1000:.2f} us (L2 flushed before); blocks {len(rows)}; "
        f"span {us(max(r[END] for r in rows)):.2f} us from the first block's entry"
        + (f"; COUNTERS LEFT {counters_left}" if counters_left else "")
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
        return [(r[b] - r[a]) / 1e3 if r[a] and r[b] else None for r in rows]

    print("| phase (us) | blocks | min | p10 | median | p90 | max |\n|---|--:|--:|--:|--:|--:|--:|")
    spread("entry, from the first block's", [us(r[ENTRY]) for r in rows])
    spread("entry to consumers' start", between(ENTRY, START))
    spread("start to first data", between(START, FIRST_DATA))
    spread("start to whole waves' end", between(START, WAVES_END))
    for p in range(2):
        info = [r[slot(p, "info")] if r[slot(p, "loop")] else None for r in rows]
        spread(
            f"share {p}: steps",
            [(i & 0xFF) - ((i >> 8) & 0xFF) if i is not None else None for i in info],
        )
        before = WAVES_END if p == 0 else None
        loops = [
            (
                r[slot(p, "loop")]
                - (
                    r[before]
                    if before is not None
                    else (r[slot(0, "tile stored")] or r[slot(0, "fix-up")])
                )
            )
            / 1e3
            if r[slot(p, "loop")]
            else None
            for r in rows
        ]
        spread(f"share {p}: main loop", loops)
        marks = ("loop",) + SHARE_MARKS[1:]
        for a, b in zip(marks, marks[1:], strict=False):
            spread(f"share {p}: {a} -> {b}", between(slot(p, a), slot(p, b)))
        spread(f"share {p}: the fix-up in all", between(slot(p, "loop"), slot(p, "fix-up")))
    spread("producer's last copy issued", [us(r[PRODUCER_END]) for r in rows])
    spread("end (stores read)", [us(r[END]) for r in rows])
    slowest = max(rows, key=lambda r: r[END])
    names = {
        ENTRY: "entry",
        START: "start",
        FIRST_DATA: "first data",
        WAVES_END: "waves end",
        PRODUCER_END: "producer end",
        END: "end",
    }
    for p in range(2):
        names.update({slot(p, m): f"share {p} {m}" for m in SHARE_MARKS})
    marks = ", ".join(f"{n} {us(slowest[i]):.2f}" for i, n in sorted(names.items()) if slowest[i])
    print(f"slowest block {rows.index(slowest)}: {marks}")


if __name__ == "__main__":
    main()
