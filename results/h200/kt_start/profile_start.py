"""Where a small Kernel Tuner script's seconds go before its first measurement, ours and Kernel
Tuner's, each step in a fresh interpreter (issue 33: a small example ran 3.4 s under autotune
against 1.6 s under Kernel Tuner 1.5 on the H200). On the GPU machine, from the checkout root:
    python3 results/h200/kt_start/profile_start.py > $OUT/kt_start.md
Each row is the median of 5 runs of `python3 -c STEP`, wall time, minus nothing: read the
differences between rows."""

import statistics
import subprocess
import sys
import time

STEPS = {
    "python3 -c pass": "pass",
    "import numpy": "import numpy",
    "import cupy": "import cupy",
    "CUDA context (cupy)": "import cupy; cupy.cuda.runtime.free(0)",
    "from autotune import tune_kernel": "from autotune import tune_kernel",
    "our worker ready (GpuEvaluator)": (
        "from autotune.gpu.evaluator import GpuEvaluator; GpuEvaluator(0).close()"
    ),
    "our worker spawned, store loaded, worker ready": (
        "from autotune.gpu.evaluator import GpuEvaluator\n"
        "e = GpuEvaluator(0, wait=False)\nimport autotune.store, autotune.tuning.session\n"
        "e.device\ne.close()"
    ),
    "import kernel_tuner": "import kernel_tuner",
    "Kernel Tuner's cupy backend ready": (
        "from kernel_tuner.backends.cupy import CupyFunctions; CupyFunctions(0)"
    ),
}


def wall(code: str) -> float | None:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        return None
    return time.perf_counter() - start


print("| step | median wall (s) of 5 fresh interpreters |\n|---|--:|")
for name, code in STEPS.items():
    times = [wall(code) for _ in range(5)]
    ok = [t for t in times if t is not None]
    shown = f"{statistics.median(ok):.3f}" if len(ok) == len(times) else "failed"
    print(f"| {name} | {shown} |")
