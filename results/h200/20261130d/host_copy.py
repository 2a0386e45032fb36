"""What returning a checked run's 800 MB output to the host costs, each way the tuner has done it
(accuracy.py's output: 100M float64; call 4 of ../20261130c took 0.9 s a configuration more
after the in-memory hand-over replaced get(out=mapped file) with get()). Each line: the median of
five, in seconds, of the copy alone and then of the copy plus accuracy.py's two observers'
arithmetic on the result (RMSE and the mean relative error against a float64 answer).
Run on the GPU machine: python3 host_copy.py"""

import os
import statistics
import subprocess
import tempfile
import time

import cupy as cp
import numpy as np

N = 100_000_000
rng = np.random.default_rng(0)
answer = rng.standard_normal(N)
device = cp.asarray(answer + 1e-7)
pinned = None


def observers(out):
    rmse = np.sqrt(np.mean((out - answer) ** 2))
    mre = np.mean(np.abs((out - answer) / answer))
    return rmse, mre


def fresh():
    return device.get()


REUSED = np.zeros(N)
REUSED[...] = 0  # its pages touched before the first copy


def reused():
    return device.get(out=REUSED)


def mapped_file():
    fd, name = tempfile.mkstemp(suffix=".npy")
    os.close(fd)
    target = np.lib.format.open_memmap(name, "w+", np.float64, (N,))
    device.get(out=target)
    del target
    out = np.load(name, mmap_mode="r")
    os.unlink(name)
    return out


def pinned_copy():
    global pinned
    if pinned is None:
        pinned = cp.cuda.alloc_pinned_memory(N * 8)
    host = np.frombuffer(pinned, np.float64, N)
    return device.get(out=host)


def touched_empty():
    out = np.empty(N)
    out[...] = 1.0
    return out


for name, how in [
    ("get() into a new array", fresh),
    ("get(out=) into a reused array", reused),
    ("get(out=) into a new mapped .npy file", mapped_file),
    ("get(out=) into reused pinned memory", pinned_copy),
    ("np.empty(N) filled (page faults alone)", touched_empty),
]:
    copy, total = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        out = how()
        cp.cuda.Device().synchronize()
        t1 = time.perf_counter()
        observers(out)
        t2 = time.perf_counter()
        copy.append(t1 - t0)
        total.append(t2 - t0)
        del out
    print(
        f"{name}: copy {statistics.median(copy):.3f} s, "
        f"with observers {statistics.median(total):.3f} s"
    )

for what in ("/sys/kernel/mm/transparent_hugepage/enabled", "/proc/sys/vm/overcommit_memory"):
    print(what, open(what).read().strip())
print(subprocess.run(["df", "-hT", tempfile.gettempdir()], capture_output=True, text=True).stdout)
