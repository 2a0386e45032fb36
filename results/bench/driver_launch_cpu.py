"""The host time of one runtime launch spent in ctypes, on a CPU without a GPU: the runtime's
DriverLaunch (gpu/launch.py) calling a stand-in of cuLaunchKernel's signature that returns at
once (compiled here with the system's C compiler), as it calls the driver now (C values made
once) and as it did before 2026-11-30 (argtypes converting the eleven arguments every launch).
The launch plan is a tc_wgmma launch's shape: four buffer slots and an int. Prints the median
of seven timings of 200,000 launches each way, in microseconds. From the checkout root:
    python3 results/bench/driver_launch_cpu.py

It measures DriverLaunch as it was at 5f95238-8cd4645 (run it in a worktree of one of those):
since 848255e a launch goes through CuPy's compiled binding of cuLaunchKernel, which needs the
real driver, and the H200's figures replace these (../h200/20261130e/README.md)."""

import ctypes
import statistics
import subprocess
import tempfile
import timeit
from pathlib import Path
from types import SimpleNamespace

import autotune.gpu.launch as launch
from autotune.families.plan import Launch

STAND_IN = """
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned smem, void* stream, void** params, void** extra) {
    return 0;
}
"""


def stand_in(directory: Path, argtypes: bool):
    source, library = directory / "stand_in.c", directory / "libstand_in.so"
    if not library.exists():
        source.write_text(STAND_IN)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library, source], check=True)
    function = ctypes.CDLL(str(library)).cuLaunchKernel
    if argtypes:  # the way before: every argument converted by ctypes on every call
        function.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    function.restype = ctypes.c_int
    return SimpleNamespace(cuLaunchKernel=function)


if __name__ == "__main__":
    plan = Launch(
        "k", grid=(132, 1, 1), block=(384, 1, 1), args=("x", "w", "y", "bias", 7),
        smem_bytes=200_000,
    )  # fmt: skip
    buffers = {"x": 0x1000, "w": 0x2000, "y": 0x3000, "bias": 0x4000}
    with tempfile.TemporaryDirectory() as scratch:
        for name, argtypes in (("C values made once (now)", False), ("argtypes (before)", True)):
            driver = stand_in(Path(scratch), argtypes)
            launch._driver = lambda d=driver: d
            op = launch.DriverLaunch(SimpleNamespace(ptr=0x7F0000001000), plan)
            if argtypes:  # what the launch passed before: Python ints, for argtypes to convert
                dims = tuple(d.value for d in op.dims)

                def call(op=op, dims=dims):
                    for key, slot in op.slots:
                        slot.value = buffers[key]
                    op._launch(op.fn, *dims, 0x5555000, op.params, None)
            else:

                def call(op=op):
                    op(buffers, 0x5555000)

            runs = timeit.repeat(call, number=200_000, repeat=7)
            print(f"{name}: {statistics.median(runs) / 200_000 * 1e6:.3f} us a launch")
