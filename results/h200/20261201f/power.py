"""Power and clocks under our best tc_wgmma configuration and under cuDNN, on the same layer,
inputs and machine. Session 61 found ours at 1.58-1.62 GHz where cuDNN ran at 1.63 on tf32's
28x28 C = 512: are both at the power limit, and does ours spend more energy a run?

Each side is first timed as autotune times it (protocol 2: the L2 flushed before each run, a few
tens of milliseconds in all) with the SM clock sampled every 2 ms, then runs back to back (no L2
flush: the flush's memset would count as its energy) for --window seconds; twice, in the order
ours, cuDNN, ours, cuDNN. The back-to-back window runs inside autotune's own NVML watch
(gpu/observe.py: the median power of the window, energy a run from NVML's counter, the SM clock
sampled every 10 ms). NVML's clock event reasons are sampled beside it; a reason is listed with
the share of samples that had it. Both sides read the same input and filter buffers (uniform in
[-1, 1), as the evaluator draws them), cuDNN through channels-last views.

    python3 power.py STORE --shape N=28,K=3,C=512,F=512,B=32 --dtype tf32 [--shape ...]
        [--window 2] > power.md

STORE is an autotune database: the configuration is the fastest evaluation of the current
kernel stored for the shape on this device's name.
"""

from __future__ import annotations

import argparse
import dataclasses
import sqlite3
import statistics
import threading
import time

import cupy as cp
import torch

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare
from autotune.gpu.observe import Watch, nvml
from autotune.gpu.session import GpuSession, TimingPolicy
from autotune.gpu.torch_conv import cudnn_settings, operands
from autotune.model.observe import ENERGY_J, POWER_W, SM_CLOCK_MHZ, SM_CLOCK_MIN_MHZ, Observe
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

OBSERVE_ALL = dict(power=True, energy=True, clocks=True, temperature=True)


def best_config(store: str, problem: ConvProblem, digest: str, device: str) -> tuple[str, float]:
    row = (
        sqlite3.connect(store)
        .execute(
            "select e.config, e.time_ms from evaluations e join devices d on d.id = e.device_id"
            " where e.family = 'tc_wgmma' and e.problem_key = ? and e.status = 'OK'"
            " and e.kernel_digest = ? and d.name = ? order by e.time_ms limit 1",
            (problem.key, digest, device),
        )
        .fetchone()
    )
    if row is None:
        raise SystemExit(f"power.py: no evaluation of {problem.key} with this kernel in {store}")
    return row[0], row[1]


class Reasons:
    """NVML's clock event reasons sampled on a thread: the share of samples with each bit."""

    def __init__(self, handle, interval_s: float = 0.01) -> None:
        self.n, self.handle, self.interval_s = nvml(), handle, interval_s
        self.counts: dict[int, int] = {}
        self.samples = 0
        self._stop = threading.Event()

    def __enter__(self) -> Reasons:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        read = (
            getattr(self.n, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or self.n.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        while not self._stop.wait(self.interval_s):
            bits = read(self.handle)
            self.samples += 1
            for b in range(32):
                if bits >> b & 1:
                    self.counts[1 << b] = self.counts.get(1 << b, 0) + 1

    def text(self) -> str:
        names = {
            getattr(self.n, a): a.split("Reason")[-1]
            for a in dir(self.n)
            if a.startswith(("nvmlClocksEventReason", "nvmlClocksThrottleReason"))
            and isinstance(getattr(self.n, a), int)
            and "All" not in a
            and "None" not in a
        }
        parts = [
            f"{names.get(bit, hex(bit))} {100 * c / max(self.samples, 1):.0f}%"
            for bit, c in sorted(self.counts.items())
        ]
        return ", ".join(parts) or "none"


def observed(session: GpuSession, run, estimate_ms: float, window_s: float) -> dict:
    """`run` timed by protocol 2 with the SM clock sampled, then one back-to-back window under
    autotune's NVML watch and the reasons' sampler."""
    with Watch(Observe(clocks=True, interval_s=0.002), session.device) as timed:
        samples = session.time_runs(run, TimingPolicy())
    protocol2 = dict(timed.readings()["observations"])
    time.sleep(0.5)
    watch = Watch(Observe(**OBSERVE_ALL, window_s=window_s), session.device)
    with Reasons(watch.handle) as reasons, watch:
        watch.window(run, session.sync, estimate_ms)
    readings = dict(watch.readings()["observations"])
    _, _, runs, _, elapsed_s = watch._window
    readings["ms_a_run"] = 1e3 * elapsed_s / runs
    readings["reasons"] = reasons.text()
    readings["p2_ms"] = statistics.median(samples)
    readings["p2_s"] = sum(samples) / 1e3
    readings["p2_mhz"] = protocol2.get(SM_CLOCK_MHZ, float("nan"))
    return readings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--shape", action="append", required=True, help="N=..,K=..,C=..,F=..,B=..")
    ap.add_argument("--dtype", action="append", required=True)
    ap.add_argument("--window", type=float, default=2.0)
    ap.add_argument("--device-name", default="NVIDIA H200")
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    digest = family.kernel_digest()
    session = GpuSession(0)
    sm_count = session.info().sm_count
    compiler = Compiler(arch="sm_90")
    print(
        "| layer | dtype | side | protocol 2 ms | its s | its SM MHz | back to back: ms a run | W |"
        " J a run | SM MHz mean | SM MHz min | °C | clock event reasons (share of samples) |\n"
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
    )
    for dtype in args.dtype:
        cudnn_settings(torch, dtype)
        for shape in args.shape:
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=dtype, layout="NHWC")
            text, stored_ms = best_config(args.store, problem, digest, args.device_name)
            plan = family.plan(problem, family.complete(Config.from_json(text)))
            _, functions = load_module(compiler.compile(plan).cubin, plan.entries, "/tmp", False)
            opt_in_shared_memory(functions, plan.all_launches)
            launches = tuple(
                dataclasses.replace(lc, grid=lc.grid_on(sm_count)) for lc in plan.launches
            )
            arrays = session.fresh_inputs(family.buffers(problem), seed=1)
            for name, out_shape in family.buffers(problem).outputs:
                arrays[name] = session.poisoned(out_shape, dtype)
            for name, scratch in plan.scratch:
                arrays[name] = cp.zeros(scratch, dtype=cp.float32)
            arrays.update(session.zeroed_counters(plan))
            calls = bind(prepare(launches, functions), arrays)

            def ours(calls=calls) -> None:
                for fn, grid, block, fargs, smem in calls:
                    fn(grid, block, fargs, shared_mem=smem)

            x, w = operands(torch, problem, arrays)
            stride = problem.stride

            def cudnn(x=x, w=w, stride=stride) -> None:
                torch.nn.functional.conv2d(x, w, stride=stride)

            cudnn()  # cuDNN's algorithm search, outside the windows
            session.sync()
            label = problem.key.split(",dtype")[0]
            print(f"<!-- {label} {dtype}: ours {text} (stored {stored_ms:.4f} ms) -->")
            for side, run in (("ours", ours), ("cuDNN", cudnn)) * 2:
                r = observed(session, run, stored_ms, args.window)
                print(
                    f"| {label} | {dtype} | {side} | {r['p2_ms']:.4f} | {r['p2_s']:.3f} | "
                    f"{r['p2_mhz']:.0f} | {r['ms_a_run']:.4f} | "
                    f"{r.get(POWER_W, float('nan')):.0f} | {r.get(ENERGY_J, float('nan')):.4f} | "
                    f"{r.get(SM_CLOCK_MHZ, float('nan')):.0f} | "
                    f"{r.get(SM_CLOCK_MIN_MHZ, float('nan')):.0f} | "
                    f"{r.get('temperature_c', float('nan')):.0f} | {r['reasons']} |",
                    flush=True,
                )
                time.sleep(0.5)
            del arrays, calls, x, w
            cp.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
