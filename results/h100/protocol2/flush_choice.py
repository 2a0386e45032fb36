"""Which flush and which stream keep the timer's own overhead lowest? Times an empty kernel and a
100 us spin under protocol 2 with three ways of writing the flush buffer before each sample
(cudaMemsetAsync, CuPy's elementwise fill, a vectorised store kernel) and none, on the legacy
default stream, then with the memset on a blocking and a non-blocking stream of our own. Run on
the GPU machine:
    python3 results/h100/protocol2/flush_choice.py
"""

from __future__ import annotations

from pathlib import Path

import cupy as cp
import numpy as np

from autotune.gpu.compiler import Compiler
from autotune.gpu.session import GpuSession
from autotune.gpu.timing import flush_bytes

ROOT = Path(__file__).resolve().parents[3]
STORE = r"""
extern "C" __global__ void flush_store(int4* buf, size_t n, int value) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        buf[i] = make_int4(value, value, value, value);
}
"""


def main() -> None:
    session = GpuSession(0)
    compiled = Compiler(arch=session.info().arch).compile_source(
        ROOT / "tests" / "data" / "timer_kernels.cu", ()
    )
    kernels = session.load(compiled.cubin, ("empty_kernel", "spin"))
    l2 = session._attribute_code(38)
    buf = cp.empty(flush_bytes(l2), dtype=cp.uint8)
    store = cp.RawKernel(STORE, "flush_store")
    n16 = buf.nbytes // 16
    sms = session.limits().SM_COUNT
    flushes = {
        "memsetAsync": lambda: cp.cuda.runtime.memsetAsync(
            buf.data.ptr, 0, buf.nbytes, cp.cuda.get_current_stream().ptr
        ),
        "cupy fill(1)": lambda: buf.fill(1),
        "int4 store kernel": lambda: store((sms * 4,), (512,), (buf, np.uint64(n16), np.int32(1))),
        "none": lambda: None,
    }
    runs = {
        "empty": lambda: kernels["empty_kernel"]((1,), (1,), ()),
        "spin 200k cycles": lambda: kernels["spin"]((1,), (1,), (np.int64(200_000), np.uint64(0))),
    }
    # How long each flush keeps the GPU busy (it must outlast the host's submission).
    for name, flush in flushes.items():
        start, end = cp.cuda.Event(), cp.cuda.Event()
        flush()
        start.record()
        for _ in range(10):
            flush()
        end.record()
        end.synchronize()
        print(f"flush {name:<18} {cp.cuda.get_elapsed_time(start, end) / 10 * 1e3:8.1f} us each")
    for run_name, run in runs.items():
        for name, flush in flushes.items():
            samples = []
            for _ in range(3):
                pairs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(200)]
                for s, e in pairs:
                    flush()
                    s.record()
                    run()
                    e.record()
                pairs[-1][1].synchronize()
                samples += [cp.cuda.get_elapsed_time(s, e) for s, e in pairs]
            q1, med, q3 = np.percentile(samples, [25, 50, 75])
            iqr = (q3 - q1) * 1e3
            print(f"{run_name:<17} flush {name:<18} median {med * 1e3:7.2f} us  IQR {iqr:5.2f} us")
    for stream_name, stream in (
        ("legacy default", cp.cuda.Stream.null),
        ("own blocking", cp.cuda.Stream(non_blocking=False)),
        ("own non-blocking", cp.cuda.Stream(non_blocking=True)),
    ):
        with stream:
            for run_name, run in runs.items():
                samples = []
                for _ in range(3):
                    pairs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(200)]
                    for s, e in pairs:
                        flushes["memsetAsync"]()
                        s.record()
                        run()
                        e.record()
                    pairs[-1][1].synchronize()
                    samples += [cp.cuda.get_elapsed_time(s, e) for s, e in pairs]
                med = float(np.median(samples))
                print(f"stream {stream_name:<17} {run_name:<17} median {med * 1e3:7.2f} us")


if __name__ == "__main__":
    main()
