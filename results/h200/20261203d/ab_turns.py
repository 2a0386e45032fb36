"""Two texts of tc_wgmma on the same configurations, as ../20261203c/ab_texts.py times them
but with the order of the two launches turned every run (A B, B A, ...), each order under both
flush counts of protocol 2 (one flush, then two, every second pair), and both texts on one set
of arrays. ab_texts.py read the same change from each side: session 80 (the stmatrix text the
family's) 0.9-2.9% slower on three of five picks, session 81's call 1 (the pair text the
family's) 1.8-3.7% slower on four. Not the order: with --same (the family's own text on both
sides, an A/A) and the order turned, the side on the arrays allocated first still read 1.5%
(28x28) and 3.9% (224x224) slower (call 3, with --own-arrays, each text its own arrays as in
ab_texts.py). Prints a Markdown row a configuration: the baseline's median, this text's, and
the change.

    python3 results/h200/20261203d/ab_turns.py --baseline-source .head/tc_wgmma.cu \
        --shape N=28,K=1,C=512,F=256,B=32,epilogue=bias_relu --config '{"BM":128,...}'
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

import cupy as cp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "20261203c"))
sys.path.insert(0, str(HERE.parent / "20261203b"))
sys.path.insert(0, str(HERE.parent / "20261201"))
from ab_texts import problem_of  # noqa: E402
from sk_trace import plan_arrays  # noqa: E402  (session 64's harness: the evaluator's arrays)
from timeline import timed_run  # noqa: E402

from autotune.families import get_family  # noqa: E402
from autotune.gpu.compiler import Compiler  # noqa: E402
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402
from autotune.model.space import Config  # noqa: E402


def medians_in_turns(
    family, problem, config, session, compiler, tmp, launches, sources, runs, own_arrays=False
):
    """The median event time of each text in `sources` (None: the family's own); run i
    launches them in order when i % 2 == 0, reversed otherwise, after 1 + (i // 2) % 2 flushes
    each; on one set of arrays unless own_arrays."""
    calls, arrays = [], None
    for source in sources:
        plan = family.plan(problem, config)
        if source is not None:
            plan = dataclasses.replace(plan, source=source)
        module, functions = load_module(compiler.compile(plan).cubin, plan.entries, tmp, keep=True)
        opt_in_shared_memory(functions, plan.all_launches)
        if arrays is None or own_arrays:
            arrays = plan_arrays(session, family.buffers(problem), plan)
        calls.append(bind(prepare(launches, functions), arrays))
    flush = session._l2_flush()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = [[] for _ in sources]
    for i in range(runs):
        order = range(len(calls)) if i % 2 == 0 else reversed(range(len(calls)))
        for k in order:
            times[k].append(timed_run(calls[k], (flush,) * (1 + (i // 2) % 2), start, stop))
    return [statistics.median(t) for t in times]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--config", action="append", required=True, help="JSON of the tunables")
    ap.add_argument("--baseline-source", type=Path)
    ap.add_argument("--same", action="store_true", help="the family's text on both sides")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--own-arrays", action="store_true", help="each text its own arrays")
    args = ap.parse_args()
    if args.same == (args.baseline_source is not None):
        ap.error("give --baseline-source or --same")
    family = get_family("tc_wgmma")
    problem = problem_of(args.shape, args.dtype)
    session = GpuSession(0)
    sm_count = session.info().sm_count
    compiler = Compiler(arch="sm_90")
    source = family.source_path if args.same else args.baseline_source
    with tempfile.TemporaryDirectory(dir=family.source_path.parent) as tmp:
        # Beside the original, so that its headers resolve.
        baseline = Path(tmp).parent / f".{Path(tmp).name}_tc_wgmma_baseline.cu"
        baseline.write_text(source.read_text())
        try:
            for text in args.config:
                config = family.complete(Config.from_json(text))
                plan = family.plan(problem, config)
                launches = tuple(
                    dataclasses.replace(lc, grid=lc.grid_on(sm_count)) for lc in plan.launches
                )
                this, before = medians_in_turns(
                    family, problem, config, session, compiler, tmp, launches, (None, baseline),
                    runs=args.runs, own_arrays=args.own_arrays,
                )  # fmt: skip
                keys = ("BM", "BN", "WG", "STAGES", "PINGPONG", "PERSISTENT", "STAGING")
                label = " ".join(f"{k}={config[k]}" for k in keys)
                side = ("A/A" if args.same else "A/B") + (" own" if args.own_arrays else "")
                print(
                    f"| {side} | {problem.key} | {label} | {before * 1000:.2f} | "
                    f"{this * 1000:.2f} | {(this / before - 1) * 100:+.1f}% |",
                    flush=True,
                )
        finally:
            baseline.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
