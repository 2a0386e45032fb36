"""Does a measurement's time depend on where its buffers lie? Session 72's tables alternated:
every second measurement, ours or cuDNN's, was about 0.5 us slower, whichever side it was
(`README.md`, section 1). This measures one layer's best, and cuDNN, many times in a row in one
process, recording each measurement's buffer addresses, three ways:

- **fresh**: as the tuner and the tables measure (new buffers each measurement, the memory pool
  emptied after it);
- **kept**: CuPy's pool never emptied, so that each measurement reuses the last one's memory
  (cuDNN's output, PyTorch's, is still freed: only its inputs are kept);
- **shifted** (ours only): fresh, with a pad of k MiB allocated first (k = 0 .. 15), to move the
  buffers to other addresses.

    python3 modes.py STORE --dtype fp16 --shape N=7,K=1,C=512,F=2048,B=32 [--count 6] > modes.md

STORE is an autotune database; ours is the fastest evaluation of the current tc_wgmma kernel
stored for the shape. Runs the evaluator in this process (InProcessEvaluator) so that the
addresses can be read.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import cupy as cp

from autotune.families import get_family
from autotune.gpu import session as gpu_session
from autotune.gpu.evaluator import InProcessEvaluator
from autotune.gpu.timing import TimingPolicy
from autotune.model.observe import SM_CLOCK_MHZ, Observe
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.tuning.baselines import TASK_TIMEOUT_S, _baseline_task
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201g"))
from rest_ab import best_config  # noqa: E402  (session 64's: the store's fastest evaluation)

MIB = 1 << 20


class Pool:
    """CuPy's default pool, whose emptying (after every measurement: gpu/session.py) can be
    held off, so that each measurement reuses the last one's memory."""

    def __init__(self) -> None:
        self.pool, self.keep = cp.get_default_memory_pool(), False

    def free_all_blocks(self) -> None:
        if not self.keep:
            self.pool.free_all_blocks()

    def __getattr__(self, name: str):
        return getattr(self.pool, name)


placed: list[tuple[str, int, int]] = []  # (buffer, address, bytes) of the measurement under way


def _recording(method, names):
    def wrapped(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        arrays = result if isinstance(result, dict) else {names: result}
        for name, a in arrays.items():
            placed.append((name, int(a.data.ptr), int(a.nbytes)))
        return result

    return wrapped


def _where() -> str:
    """The measurement's input and output addresses: each as hex, and its offset in its 2 MiB
    page in KiB."""
    return " ".join(f"{n}={p:#x}/{(p % (2 * MIB)) // 1024}K" for n, p, _ in placed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--count", type=int, default=6)
    args = ap.parse_args()

    gpu_session.GpuSession.fresh_inputs = _recording(gpu_session.GpuSession.fresh_inputs, "")
    gpu_session.GpuSession.poisoned = _recording(gpu_session.GpuSession.poisoned, "out")
    family = get_family("tc_wgmma")
    timing = TimingPolicy(observe=Observe(clocks=True))
    session = open_gpu_session(tempfile.mktemp(suffix=".db"), evaluator=InProcessEvaluator(0))
    pool = Pool()
    cp.get_default_memory_pool = lambda: pool  # what gpu/session.py empties after a measurement
    print("| layer | way | # | side | ms | SM MHz | buffers (address/offset in its 2 MiB page) |")
    print("|---|---|--:|---|--:|--:|---|")
    try:
        for shape in args.shape:
            one_layer(session.runner, family, timing, args, shape, pool)
    finally:
        session.close()


def one_layer(runner, family, timing, args, shape, pool: Pool) -> None:
    fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
    problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
    digest = runner.kernel_digest(family)
    config = family.complete(Config.from_json(best_config(args.store, problem.key, digest)))
    (study,), _ = plan_studies([(family, problem)], runner.limits)
    prepared = runner.prepare(study, config)
    task = _baseline_task(runner.compiler, problem, timing)

    def measure(side: str):
        placed.clear()
        if side == "ours":
            return runner.measure(study, config, prepared, best_ms=None, timing=timing, seed=0)
        return runner.evaluator.call(task, TASK_TIMEOUT_S).measurement

    def line(way: str, i: int, side: str, m) -> None:
        ms = f"{m.time_ms:.5f}" if m.status.ok else m.status.value
        mhz = m.observed.get(SM_CLOCK_MHZ) or ""
        print(f"| {shape} | {way} | {i} | {side} | {ms} | {mhz} | {_where()} |", flush=True)

    for way in ("fresh", "kept"):
        pool.keep = way == "kept"
        for side in ("ours", "cuDNN"):
            for i in range(args.count):
                line(way, i, side, measure(side))
    pool.keep = False
    pool.free_all_blocks()
    for k in range(16):
        pad = cp.empty(k * MIB + 256, dtype=cp.uint8) if k else None
        line(f"shifted {k} MiB", k, "ours", measure("ours"))
        del pad
        pool.free_all_blocks()


if __name__ == "__main__":
    main()
