"""The same tc_wgmma configurations built from several texts of the kernel, timed in turn on one
GPU: each --text NAME=PATH (a copy of kernels/tc_wgmma.cu with its headers beside it; the first
is the reference) and the checkout's own ("now"). For each layer of --bests (best_configs.py's
lines): every text's output on the same random inputs, compared bit for bit with the
reference's (these texts keep every wgmma and its order), then --rounds runs of each, protocol
2's way (L2 flushed, CUDA events around the launches), the order rotated each round; each
text's median time over the reference's, and per dtype their geometric means.

    python3 desc_ab.py --text before=.head/kernels/tc_wgmma.cu [--text ...] --bests bests.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cupy as cp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "20261201"))
from sk_trace import plan_arrays, timed_run  # noqa: E402  (session 58's, beside it)

from autotune.families import get_family  # noqa: E402
from autotune.gpu.compiler import Compiler  # noqa: E402
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402
from autotune.model.problem import ConvProblem  # noqa: E402
from autotune.model.space import Config  # noqa: E402

SHORT = ("BM", "BN", "STAGES", "PINGPONG", "STORE_TMA", "MULTICAST", "STREAM_K", "SPLIT_K")


def problem_of(shape: str, dtype: str) -> ConvProblem:
    fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
    return ConvProblem(**fields, dtype=dtype, layout="NHWC")


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--bests", required=True, type=Path)
    ap.add_argument("--dtype", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=14, help="compiler processes")
    args = ap.parse_args()

    texts = [(n, Path(p).resolve()) for n, p in (t.split("=", 1) for t in args.text)]
    family = get_family("tc_wgmma")
    names = [n for n, _ in texts] + ["now"]
    rows = [json.loads(line) for line in args.bests.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if not args.dtype or r["dtype"] in args.dtype]
    plans = []
    for r in rows:
        config = family.complete(Config.of(r["config"]))
        now = family.plan(problem_of(r["shape"], r["dtype"]), config)
        plans.append([dataclasses.replace(now, source=path) for _, path in texts] + [now])
    compiler = Compiler(arch="sm_90")
    compiler.start_pool(args.jobs)
    with ThreadPoolExecutor(args.jobs) as pool:
        flat = list(pool.map(compiler.compile, [p for layer in plans for p in layer]))
    compiler.stop_pool()
    compiled = [flat[i : i + len(names)] for i in range(0, len(flat), len(names))]

    session = GpuSession(0)
    sm_count = session.info().sm_count
    flush = session._l2_flush()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    print(f"| layer | dtype | config | {names[0]} ms | " + " | ".join(names[1:]) + " | outputs |")
    print("|---|---|---|--:|" + "--:|" * (len(names) - 1) + "---|")
    ratios: dict[str, dict[str, list[float]]] = {}
    for r, layer_plans, layer_compiled in zip(rows, plans, compiled, strict=True):
        problem = problem_of(r["shape"], r["dtype"])
        arrays = plan_arrays(session, family.buffers(problem), layer_plans[-1])
        calls, outputs = [], []
        for plan, comp in zip(layer_plans, layer_compiled, strict=True):
            _, functions = load_module(comp.cubin, plan.entries, "/tmp", keep=False)
            opt_in_shared_memory(functions, plan.all_launches)
            launches = tuple(
                dataclasses.replace(lc, grid=lc.grid_on(sm_count)) for lc in plan.launches
            )
            calls.append(bind(prepare(launches, functions), arrays))
            arrays["y"].view(cp.uint8).fill(0xFF)  # NaN in every storage type
            timed_run(calls[-1], flush, start, stop)
            outputs.append(arrays["y"].view(cp.uint8).copy())
        differ = [
            n for n, o in zip(names, outputs, strict=True) if not cp.array_equal(o, outputs[0])
        ]
        verdict = "identical" if not differ else "DIFFER: " + ", ".join(differ)
        times: list[list[float]] = [[] for _ in names]
        for k in range(args.rounds):
            for j in range(len(names)):
                j = (j + k) % len(names)
                times[j].append(timed_run(calls[j], flush, start, stop))
        medians = [statistics.median(t) for t in times]
        per = ratios.setdefault(r["dtype"], {})
        for n, m in zip(names[1:], medians[1:], strict=True):
            per.setdefault(n, []).append(m / medians[0])
        short = " ".join(f"{k}={r['config'][k]}" for k in SHORT if k in r["config"])
        cells = [r["shape"], r["dtype"], short, f"{medians[0]:.4f}"]
        cells += [f"{m / medians[0]:.3f}" for m in medians[1:]]
        print("| " + " | ".join((*cells, verdict)) + " |", flush=True)
        del arrays, calls, outputs
    print()
    for dtype, per in ratios.items():
        for n, rs in per.items():
            print(
                f"{dtype} {n}: {len(rs)} layers, / {names[0]}: geometric mean {geomean(rs):.4f}, "
                f"range {min(rs):.3f}-{max(rs):.3f}, faster on {sum(x < 1 for x in rs)}"
            )


if __name__ == "__main__":
    main()
