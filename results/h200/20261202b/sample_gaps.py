"""Where a protocol-2 sample's time goes, without Nsight Systems: session 69's both_sides.py
(ours and cuDNN, each the way the tables measure it) run with the GPU opened in this process
and PyTorch's profiler (CUPTI) recording every kernel and memset on the device. The trace is
written in the columns of `nsys stats -r cuda_gpu_trace -f csv`, which session 69's
flush_gaps.py reads: for every flush, the gap from its end to the sample's first kernel, the
kernels' span and their own time.

    python3 sample_gaps.py STORE TRACE.csv --dtype fp16 --shape N=7,K=1,C=2048,F=512,B=32 \
        [--shape ...] [--repeats 2] > both_sides.md
    python3 ../20261202/flush_gaps.py TRACE.csv > gaps.md

With --kernel-flush, each flush's memset is followed by a kernel writing the same buffer
(FLUSH_KERNEL), so that what a memset leaves in L2 and what a kernel's writes leave can be told
apart; sample_runs.py counts that kernel as the flush's.

The events' timestamps come from CUPTI's activity records (GPU time, nanoseconds), not from
the CUDA events that protocol 2 reads; the both_sides table printed meanwhile is protocol 2's.
"""

from __future__ import annotations

import csv
import functools
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261202"))
import both_sides  # noqa: E402  (session 69's: ours and cuDNN, order alternating)
from sample_runs import FLUSH_KERNEL, MARKER_BYTES  # noqa: E402  (beside this script)

from autotune.gpu import library_tasks  # noqa: E402
from autotune.gpu.evaluator import InProcessEvaluator  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402

FLUSH_US = 20.0  # a memset this long is a flush (256 MiB); the kernels' own memsets are short


def trace_rows(chrome_trace: Path):
    """(start ns, duration ns, bytes, grid, name) of every kernel and memset on the GPU."""
    events = json.loads(chrome_trace.read_text())["traceEvents"]
    for e in events:
        cat = e.get("cat", "")
        if e.get("ph") != "X" or cat not in ("kernel", "gpu_memset"):
            continue
        args = e.get("args", {})
        nbytes = args.get("bytes")
        if cat == "gpu_memset" and nbytes is None:
            nbytes = 256 << 20 if e["dur"] >= FLUSH_US else 0
        grid = args.get("grid", ["", "", ""])
        name = e["name"] if cat == "kernel" else "Memset (Device)"
        yield round(e["ts"] * 1000), round(e["dur"] * 1000), nbytes or 0, grid, name


def kernel_flush() -> None:
    """Protocol 2's flush (a memset), then a kernel writing the same buffer."""
    import cupy as cp

    memset_flush = GpuSession._l2_flush
    fill = cp.ElementwiseKernel("", "uint8 x", "x = 1", FLUSH_KERNEL)

    def l2_flush(self):
        memset = memset_flush(self)
        buffer = self._flush_buffer

        def flush() -> None:
            memset()
            fill(buffer)

        return flush

    GpuSession._l2_flush = l2_flush


def main() -> None:
    if "--kernel-flush" in sys.argv:
        sys.argv.remove("--kernel-flush")
        kernel_flush()
    store, out_csv = sys.argv[1], Path(sys.argv[2])
    evaluator = InProcessEvaluator(0)
    # both_sides opens its session with the worker process; here the GPU is this process's,
    # so that CUPTI sees every launch.
    both_sides.open_gpu_session = functools.partial(
        both_sides.open_gpu_session, evaluator=evaluator
    )
    # The baseline names cuDNN's kernels with a profiler of its own, which cannot run inside
    # this one (Kineto is one a process); the trace names them here.
    library_tasks._launched_kernels = lambda torch, run: "(named in the trace)"
    # both_sides prints each measurement's row right after it: a marker memset queued there
    # tells the trace's measurements apart.
    row = both_sides.cell

    def marked_row(m):
        import cupy as cp

        marker = cp.empty(MARKER_BYTES, dtype=cp.uint8)
        cp.cuda.runtime.memsetAsync(marker.data.ptr, 0, MARKER_BYTES, 0)
        cp.cuda.runtime.deviceSynchronize()
        return row(m)

    both_sides.cell = marked_row
    sys.argv = [sys.argv[0], store, *sys.argv[3:]]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        both_sides.main()
    trace = Path(tempfile.mktemp(suffix=".json"))
    prof.export_chrome_trace(str(trace))
    with out_csv.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Start (ns)", "Duration (ns)", "Bytes (B)", "GrdX", "GrdY", "GrdZ", "Name"])
        for start, dur, nbytes, grid, name in sorted(trace_rows(trace)):
            w.writerow([start, dur, nbytes, *grid, name])


if __name__ == "__main__":
    main()
