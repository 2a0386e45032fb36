"""Where the GPU worker's boot goes (issue 33: 1.2-1.7 s from spawn to ready on the H200, where
CuPy's import and a CUDA context take 0.8 s): each step of the worker's start timed in this
process, in a fresh interpreter (the imports the worker makes, then GpuSession's open, info and
limits), and the same imports' own times from `python -X importtime`, largest first.
On the GPU machine, from the checkout root:  python3 results/h200/20261130b/worker_boot.py"""

import subprocess
import sys

STEPS = """
import time
t0 = time.perf_counter()
def step(name, start):
    print(f"| {name} | {time.perf_counter() - start:.3f} | {time.perf_counter() - t0:.3f} |")
    return time.perf_counter()
print("| step | s | since start |\\n|---|--:|--:|")
t = step("interpreter", t0)
import autotune.gpu.child; t = step("import autotune.gpu.child", t)
import numpy; t = step("import numpy", t)
import cupy; t = step("import cupy", t)
import autotune.gpu.evaluator; t = step("import autotune.gpu.evaluator", t)
import autotune.gpu.session as s; t = step("import autotune.gpu.session", t)
cupy.cuda.runtime.getDeviceCount(); t = step("getDeviceCount (driver init)", t)
session = s.GpuSession(0); t = step("GpuSession(0): device.use()", t)
cupy.cuda.runtime.free(0); t = step("CUDA context (cudaFree(0))", t)
info = session.info(); t = step("session.info()", t)
limits = session.limits(); t = step("session.limits()", t)
import pickle; pickle.dumps((info, limits)); t = step("pickled for the handshake", t)
"""

if __name__ == "__main__":
    done = subprocess.run([sys.executable, "-c", STEPS], capture_output=True, text=True)
    print(done.stdout or done.stderr)
    probe = "import autotune.gpu.child, autotune.gpu.evaluator, autotune.gpu.session"
    timed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True
    )
    rows = []
    for line in timed.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    print("| module (with what it imports) | ms |\n|---|--:|")
    for cumulative, name in sorted(rows, reverse=True)[:25]:
        print(
            f"| {name.strip()} ({len(name) - len(name.lstrip())} deep) | {cumulative / 1000:.1f} |"
        )
