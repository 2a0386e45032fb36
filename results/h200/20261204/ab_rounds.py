"""Two texts of tc_wgmma on the same configuration, timed in rounds that each start afresh: both
texts' modules loaded again (the first-loaded text swapped every round), a fresh set of arrays
for both behind a pad of a different size each round (so that the round's addresses differ),
then session 81's ab_turns.py order (the two launches turned every run, one flush then two
every second pair). Session 81's harnesses read an A/A (the same text on both sides) 0.5-3.9%
apart: the bias followed the module load and the arrays, which stayed put for a whole
measurement there. Here each round is one draw of both, and the change is the median of the
rounds' ratios.

Prints a Markdown row a configuration: the baseline's median, this text's (medians over every
round's runs), the median of the rounds' ratios as a change, the rounds' ratios' range and
standard deviation, and what the rounds drew afresh (--vary: both, only the modules, or only
the arrays' addresses; the other kept from the first round).

    python3 results/h200/20261204/ab_rounds.py --baseline-source .head/tc_wgmma.cu \
        --shape N=28,K=1,C=512,F=256,B=32,epilogue=bias_relu --config '{"BM":128,...}'
    python3 results/h200/20261204/ab_rounds.py --same --shape ... --config ...   # an A/A
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
from ab_texts import problem_of  # noqa: E402  (session 80's)
from sk_trace import plan_arrays  # noqa: E402  (session 64's: the evaluator's arrays)
from timeline import timed_run  # noqa: E402  (session 79's: protocol 2's flushes and events)

from autotune.families import get_family  # noqa: E402
from autotune.gpu.compiler import Compiler  # noqa: E402
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402
from autotune.model.space import Config  # noqa: E402

PAD_STEP = 3 << 19  # 1.5 MiB more pad each round: the arrays' addresses move by it


def load(cubins, plan, tmp, order):
    """Each text's entry functions, the modules loaded in `order`."""
    functions = [None] * len(cubins)
    for i in order:
        _, functions[i] = load_module(cubins[i], plan.entries, tmp, keep=True)
        opt_in_shared_memory(functions[i], plan.all_launches)
    return functions


def one_round(cubins, plan, problem, family, session, launches, tmp, runs, k, vary, loaded):
    """Each text's run times of round k, and the input's address: modules loaded again (the
    second text first in odd rounds) unless `vary` leaves them out (then `loaded`'s), fresh
    arrays behind a pad of k * PAD_STEP bytes (0 where `vary` leaves the arrays out), the order
    turned every run."""
    order = list(range(len(cubins)))
    if k % 2:
        order.reverse()
    functions = load(cubins, plan, tmp, order) if "modules" in vary else loaded
    cp.get_default_memory_pool().free_all_blocks()
    pad = cp.empty((k if "arrays" in vary else 0) * PAD_STEP + 1, dtype=cp.uint8)
    arrays = plan_arrays(session, family.buffers(problem), plan)
    calls = [bind(prepare(launches, f), arrays) for f in functions]
    flush = session._l2_flush()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = [[] for _ in calls]
    for i in range(runs):
        for j in order if i % 2 == 0 else reversed(order):
            times[j].append(timed_run(calls[j], (flush,) * (1 + (i // 2) % 2), start, stop))
    where = arrays["x"].data.ptr
    del pad, arrays, calls
    return times, where


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--config", action="append", required=True, help="JSON of the tunables")
    ap.add_argument("--baseline-source", type=Path)
    ap.add_argument("--same", action="store_true", help="the family's text on both sides")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=20, help="runs a text a round")
    ap.add_argument(
        "--vary",
        choices=("both", "modules", "arrays"),
        default="both",
        help="what each round draws afresh: the modules, the arrays' addresses or both",
    )
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
                cubins = [
                    compiler.compile(p).cubin
                    for p in (plan, dataclasses.replace(plan, source=baseline))
                ]
                vary = ("modules", "arrays") if args.vary == "both" else (args.vary,)
                loaded = load(cubins, plan, tmp, range(len(cubins)))
                rounds = [
                    one_round(
                        cubins, plan, problem, family, session, launches, tmp, args.runs, k,
                        vary, loaded,
                    )
                    for k in range(args.rounds)
                ]  # fmt: skip
                addresses = len({where for _, where in rounds})
                rounds = [times for times, _ in rounds]
                this = statistics.median(t for r in rounds for t in r[0])
                before = statistics.median(t for r in rounds for t in r[1])
                ratios = [statistics.median(r[0]) / statistics.median(r[1]) for r in rounds]
                keys = ("BM", "BN", "WG", "STAGES", "PINGPONG", "PERSISTENT", "STAGING")
                label = " ".join(f"{k}={config[k]}" for k in keys)
                print(
                    f"| {'A/A' if args.same else 'A/B'} | {problem.key} | {label} | "
                    f"{before * 1000:.2f} | {this * 1000:.2f} | "
                    f"{(statistics.median(ratios) - 1) * 100:+.2f}% | "
                    f"{(min(ratios) - 1) * 100:+.1f}% .. {(max(ratios) - 1) * 100:+.1f}% | "
                    f"{statistics.stdev(ratios) * 100:.2f}% | {args.vary}, "
                    f"{addresses} input addresses |",
                    flush=True,
                )
        finally:
            baseline.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
