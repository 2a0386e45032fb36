"""Which part of a measurement flips its level from one measurement to the next? Call 1
(`modes.py`) found every second measurement about 0.5 us slower on a 12 us layer, with the
same buffers as with new ones, and within each measurement its odd and even samples apart by
0.3-0.7 us. This measures one layer's best --count times in a row in this process with the
timer's loop (GpuSession.time_runs) changed one way at a time:

- **as now**: protocol 2 as the timer runs it;
- **extra flush**: one more flush before the warm-up (an odd number of flushes a measurement);
- **flush twice**: two flushes before each sample;
- **flush kernel**: the flush written by a CuPy kernel (`fill`) instead of cudaMemsetAsync;
- **flush read**: the flush buffer read (summed) instead of written;
- **warm-up 4**: four warm-up runs instead of three;
- **sync each**: the host waits for each sample before queueing the next;
- **phase mix**: one more flush before every second sample;
- **phase mix small**: a 4-byte memset of the flush buffer before every second sample.

Prints each measurement's median and the medians of its even and odd samples. With --side
both, ours and cuDNN take turns, in pairs (ours, cuDNN, cuDNN, ours, ...), so that each side
takes even and odd places in the sequence alike; --variant picks some.

    python3 timer_variants.py STORE --dtype fp16 --shape N=7,K=1,C=512,F=2048,B=32 \
        [--count 8] [--side ours|cuDNN|both] [--variant NAME ...] > variants.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cupy as cp

from autotune.families import get_family
from autotune.gpu import session as gpu_session
from autotune.gpu.evaluator import InProcessEvaluator
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.tuning.baselines import TASK_TIMEOUT_S, _baseline_task
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201g"))
from rest_ab import best_config  # noqa: E402  (session 64's: the store's fastest evaluation)

VARIANTS = (
    "as now",
    "extra flush",
    "flush twice",
    "flush kernel",
    "flush read",
    "warm-up 4",
    "sync each",
    "phase mix",
    "phase mix small",
)


def variant_time_runs(variant: str):
    """GpuSession.time_runs with one thing changed (the policy's batches kept)."""

    def time_runs(self, run, policy, best_ms=None, rested=False):
        if not rested:
            self.rest(policy)
        memset = self._l2_flush()
        buffer = self._flush_buffer
        total = cp.zeros((), dtype=cp.uint64)
        flush = {
            "flush twice": lambda: (memset(), memset()),
            "flush kernel": lambda: buffer.fill(0),
            "flush read": lambda: cp.sum(buffer.view(cp.uint64), out=total),
        }.get(variant, memset)
        if variant == "extra flush":
            memset()
        for _ in range(policy.warmup + (variant == "warm-up 4")):
            run()
        self.sync()
        samples: list[float] = []
        began = time.perf_counter()
        batch = policy.first_batch(best_ms)
        while batch > 0:
            events = self._event_pairs(batch)
            for k, (start, end) in enumerate(events):
                flush()
                if variant.startswith("phase mix") and (len(samples) + k) % 2:
                    stream = cp.cuda.get_current_stream().ptr
                    size = 4 if variant.endswith("small") else buffer.nbytes
                    cp.cuda.runtime.memsetAsync(buffer.data.ptr, 0, size, stream)
                start.record()
                run()
                end.record()
                if variant == "sync each":
                    end.synchronize()
            events[-1][1].synchronize()
            samples += [cp.cuda.get_elapsed_time(start, end) for start, end in events]
            batch = policy.next_batch(samples, time.perf_counter() - began, best_ms)
        self.sync()
        return samples

    return time_runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--side", choices=("ours", "cuDNN", "both"), default="ours")
    ap.add_argument("--variant", action="append", choices=VARIANTS)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    timing = TimingPolicy()
    session = open_gpu_session(tempfile.mktemp(suffix=".db"), evaluator=InProcessEvaluator(0))
    runner = session.runner
    fields = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
    digest = runner.kernel_digest(family)
    config = family.complete(Config.from_json(best_config(args.store, problem.key, digest)))
    (study,), _ = plan_studies([(family, problem)], runner.limits)
    prepared = runner.prepare(study, config)
    task = _baseline_task(runner.compiler, problem, timing)
    print(f"{args.side}, {args.dtype} {args.shape}\n")
    print("| variant | # | side | us | even samples | odd samples | n |")
    print("|---|--:|---|--:|--:|--:|--:|")
    original = gpu_session.GpuSession.time_runs
    try:
        for variant in args.variant or VARIANTS:
            gpu_session.GpuSession.time_runs = (
                original if variant == "as now" else variant_time_runs(variant)
            )
            for i in range(args.count):
                side = args.side if args.side != "both" else ("ours", "cuDNN")[(i + 1) // 2 % 2]
                if side == "ours":
                    m = runner.measure(study, config, prepared, best_ms=None, timing=timing, seed=0)
                else:
                    m = runner.evaluator.call(task, TASK_TIMEOUT_S).measurement
                if not m.status.ok:
                    print(f"| {variant} | {i} | {side} | {m.status.value} | | | |", flush=True)
                    continue
                s = m.samples_ms
                even, odd = statistics.median(s[0::2]), statistics.median(s[1::2])
                print(
                    f"| {variant} | {i} | {side} | {m.time_ms * 1e3:.2f} | {even * 1e3:.2f} | "
                    f"{odd * 1e3:.2f} | {len(s)} |",
                    flush=True,
                )
    finally:
        gpu_session.GpuSession.time_runs = original
        session.close()


if __name__ == "__main__":
    main()
