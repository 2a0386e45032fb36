"""What cuDNN's persisting L2 lines are worth, each side: per layer, in rounds whose order
rotates, ours measured as the tables measure it (the store's fastest evaluation of the current
tc_wgmma code; protocol 2), ours with its launches' stream marking one input buffer's lines
persisting (an access-policy window over the filters, `w`, or the input, `x`, with as much of
it as the persisting-L2 limit that cuDNN's process sets holds: 11.25 MiB on the H200), cuDNN as the
tables measure it, and cuDNN with the persisting lines reset to normal and the limit set to 0
before its measurement ("cold": what protocol 2's flush means to do).

    python3 persist_ab.py STORE --dtype fp16 --shape N=7,K=1,C=2048,F=512,B=32 [--shape ...] \
        [--repeats 2] > persist_fp16.md

Prints every measurement, then per layer each mode's median and its ratio to cuDNN's, and the
persisting-L2 limit seen before each cuDNN measurement.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
from pathlib import Path

import cupy as cp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201g"))
from rest_ab import best_config, cell  # noqa: E402  (session 64's)

from autotune.families import get_family  # noqa: E402
from autotune.gpu.evaluator import InProcessEvaluator  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402
from autotune.gpu.timing import TimingPolicy  # noqa: E402
from autotune.model.observe import Observe  # noqa: E402
from autotune.model.problem import ConvProblem  # noqa: E402
from autotune.model.space import Config  # noqa: E402
from autotune.tuning.baselines import TASK_TIMEOUT_S, _baseline_task  # noqa: E402
from autotune.tuning.session import open_gpu_session  # noqa: E402
from autotune.tuning.studies import plan_studies  # noqa: E402

LIMIT_PERSISTING_L2 = 0x06  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
STREAM_ACCESS_POLICY_WINDOW = 1  # CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW
NORMAL, STREAMING, PERSISTING = 0, 1, 2  # CUaccessProperty
H200_CUDNN_LIMIT = 11_796_480  # what cuDNN's process sets (results/h200/20261202b, call 5)


class Window(ctypes.Structure):
    """CUaccessPolicyWindow, the first member of the CUstreamAttrValue union (64 bytes)."""

    _fields_ = [
        ("base_ptr", ctypes.c_void_p),
        ("num_bytes", ctypes.c_size_t),
        ("hitRatio", ctypes.c_float),
        ("hitProp", ctypes.c_int),
        ("missProp", ctypes.c_int),
        ("pad", ctypes.c_byte * 36),
    ]


CUDA = ctypes.CDLL("libcuda.so.1")
CUDA.cuCtxSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
CUDA.cuCtxGetLimit.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
CUDA.cuStreamSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(Window)]


def check(code: int, what: str) -> None:
    if code:
        sys.exit(f"persist_ab: {what} failed with CUDA error {code}")


def persisting_limit() -> int:
    value = ctypes.c_size_t()
    check(CUDA.cuCtxGetLimit(ctypes.byref(value), LIMIT_PERSISTING_L2), "cuCtxGetLimit")
    return value.value


def set_window(stream: int, base: int, nbytes: int) -> None:
    """The stream's launches mark [base, base + nbytes) persisting (nbytes 0: no window), as
    much of it as the limit holds (the hit ratio)."""
    ratio = min(1.0, H200_CUDNN_LIMIT / nbytes) if nbytes else 0.0
    w = Window(base, nbytes, ratio, PERSISTING, STREAMING)
    check(CUDA.cuStreamSetAttribute(stream, STREAM_ACCESS_POLICY_WINDOW, w), "cuStreamSetAttribute")


# The buffer whose lines our launches mark persisting, while a mode asks for one.
PERSIST: dict[str, str | None] = {"buffer": None}
fresh_inputs = GpuSession.fresh_inputs


def fresh_inputs_marked(self, buffers, seed):
    arrays = fresh_inputs(self, buffers, seed)
    name, stream = PERSIST["buffer"], cp.cuda.get_current_stream().ptr
    if name is not None:
        if persisting_limit() < H200_CUDNN_LIMIT:
            check(CUDA.cuCtxSetLimit(LIMIT_PERSISTING_L2, H200_CUDNN_LIMIT), "cuCtxSetLimit")
        array = arrays[name]
        set_window(stream, array.data.ptr, array.nbytes)
    return arrays


GpuSession.fresh_inputs = fresh_inputs_marked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    timing = TimingPolicy(observe=Observe(clocks=True))
    session = open_gpu_session(tempfile.mktemp(suffix=".db"), evaluator=InProcessEvaluator(0))
    runner = session.runner
    digest = runner.kernel_digest(family)
    # Our own stream for the persisting modes' launches (the default stream takes no window);
    # the flush and the events go with them (the timer uses the current stream).
    stream = cp.cuda.Stream(non_blocking=False)
    modes = ("ours", "ours persist w", "ours persist x", "cuDNN", "cuDNN cold")
    print(
        "| layer | round | mode | ms | SM MHz | lowest | throttled | tries | rested s |\n"
        "|---|--:|---|--:|--:|--:|--:|--:|--:|"
    )
    medians: dict[str, dict[str, float]] = {}
    limits_seen: list[int] = []
    try:
        for shape in args.shape:
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
            config = family.complete(Config.from_json(best_config(args.store, problem.key, digest)))
            (study,), _ = plan_studies([(family, problem)], runner.limits)
            prepared = runner.prepare(study, config)
            task = _baseline_task(runner.compiler, problem, timing)
            times: dict[str, list[float]] = {m: [] for m in modes}
            for r in range(args.repeats):
                order = modes[r % len(modes) :] + modes[: r % len(modes)]
                for mode in order:
                    if mode.startswith("ours"):
                        PERSIST["buffer"] = mode.split()[-1] if "persist" in mode else None
                        if PERSIST["buffer"] is None:  # no lines of an earlier mode's window
                            check(CUDA.cuCtxResetPersistingL2Cache(), "reset")
                        with stream:
                            m = runner.measure(
                                study, config, prepared, best_ms=None, timing=timing, seed=0
                            )
                            set_window(stream.ptr, 0, 0)
                        PERSIST["buffer"] = None
                    else:
                        if mode == "cuDNN cold":
                            check(CUDA.cuCtxResetPersistingL2Cache(), "reset")
                            check(CUDA.cuCtxSetLimit(LIMIT_PERSISTING_L2, 0), "cuCtxSetLimit")
                        limits_seen.append(persisting_limit())
                        m = runner.evaluator.call(task, TASK_TIMEOUT_S).measurement
                    print(f"| {shape} | {r + 1} | {mode} | {cell(m)} |", flush=True)
                    if m.status.ok:
                        times[mode].append(m.time_ms)
            medians[shape] = {k: statistics.median(v) for k, v in times.items() if v}
    finally:
        session.close()
    print(
        "\n| layer | "
        + " | ".join(f"{m} ms" for m in modes)
        + " | "
        + " | ".join(f"cuDNN / {m}" for m in modes if m.startswith("ours"))
        + " | cold / cuDNN |"
    )
    print("|---|" + "--:|" * (len(modes) + 4))
    for shape, m in medians.items():
        cells = [f"{m.get(k, float('nan')):.4f}" for k in modes]
        cells += [f"{m['cuDNN'] / m[k]:.3f}" for k in modes if k.startswith("ours") and k in m]
        cells.append(f"{m['cuDNN cold'] / m['cuDNN']:.3f}")
        print(f"| {shape} | " + " | ".join(cells) + " |")
    print(f"\npersisting-L2 limits seen before cuDNN's measurements: {sorted(set(limits_seen))}")


if __name__ == "__main__":
    main()
