"""Kernel Tuner's accuracy.py, its imports changed to autotune, with tune_kernel's kernels in this
process or, given `isolate`, in a GPU worker process: the call's wall time and the tuner's share
(call 4 of calls.sh: 58.7 s in this process at 7a297c2, where call 2 took 45.3 s at 5289c88).
From Kernel Tuner's examples/cuda directory:
    python3 -m cProfile -o OUT.prof .../accuracy_timed.py [isolate]"""

import contextlib
import io
import sys
import time
from pathlib import Path

import autotune
from autotune.bench.kt_example_run import rewrite

if __name__ == "__main__":
    isolate = sys.argv[1:] == ["isolate"]
    text = rewrite(Path("accuracy.py").read_text()).text
    original = autotune.tune_kernel
    calls = []

    def timed(*args, **kwargs):
        kwargs.setdefault("quiet", True)
        start = time.perf_counter()
        results, env = original(*args, isolate=isolate, **kwargs)
        calls.append((time.perf_counter() - start, env.get("tuning_s"), len(results)))
        return results, env

    autotune.tune_kernel = timed
    with contextlib.redirect_stdout(io.StringIO()):  # the script prints every result
        exec(compile(text, "accuracy.py", "exec"), {"__name__": "__main__"})
    for wall, tuning, count in calls:
        where = "a worker process" if isolate else "this process"
        print(f"in {where}: {count} results, {wall:.2f} s wall, tuning_s {tuning:.2f}")
