"""Loading cubins and launching a plan's kernels: what the GPU session and the runtime share.

The session binds a plan to the CuPy arrays of one evaluation; the runtime (autotune.runtime)
binds the same prepared launches to the caller's pointers on every call. Both load cubins and
read the device's limits the same way.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping

import numpy as np

from autotune.families.plan import Launch
from autotune.model.space import DeviceLimits

try:
    import cupy as cp
except ImportError:  # pragma: no cover - cupy is a dependency; without it there is no GPU path
    cp = None

# Above this, dynamic shared memory needs the function's opt-in attribute.
DEFAULT_DYNAMIC_SMEM = 48 * 1024

# cudaDeviceAttr values (driver_types.h), stable across CUDA versions.
CUDA_ATTR = {
    "MaxThreadsPerBlock": 1,
    "MaxSharedMemoryPerBlock": 8,
    "TotalConstantMemory": 9,
    "WarpSize": 10,
    "MaxRegistersPerBlock": 12,
    "MultiProcessorCount": 16,
    "MaxSharedMemoryPerBlockOptin": 97,
    "L2CacheSize": 38,
}

# A launch ready to bind: (function, grid, block, argument spec, dynamic shared memory), where
# the spec holds buffer names (bound per call) and int32 values (fixed).
Prepared = tuple


def attribute(device_index: int, name: str) -> int:
    return int(cp.cuda.runtime.deviceGetAttribute(CUDA_ATTR[name], device_index))


def device_limits(device_index: int) -> DeviceLimits:
    """Asked attribute by attribute: the cudaDeviceProp struct changed in CUDA 13 (fields
    removed), the attribute enum values did not."""
    at = attribute
    return DeviceLimits(
        MAX_THREADS=at(device_index, "MaxThreadsPerBlock"),
        SMEM_PER_BLOCK=at(device_index, "MaxSharedMemoryPerBlock"),
        SMEM_PER_BLOCK_OPTIN=at(device_index, "MaxSharedMemoryPerBlockOptin"),
        CONST_BYTES=at(device_index, "TotalConstantMemory"),
        REGS_PER_BLOCK=at(device_index, "MaxRegistersPerBlock"),
        WARP_SIZE=at(device_index, "WarpSize"),
        SM_COUNT=at(device_index, "MultiProcessorCount"),
    )


def device_name(device_index: int) -> str:
    """The name the store files a device's measurements under."""
    name = cp.cuda.runtime.getDeviceProperties(device_index)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def device_arch(device_index: int) -> str:
    props = cp.cuda.runtime.getDeviceProperties(device_index)
    return f"sm_{props['major']}{props['minor']}"


def load_module(cubin: bytes, entries: tuple[str, ...], directory: str, keep: bool):
    """Load a cubin; returns the module and its entry functions. RawModule loads from a path,
    lazily, so the file goes only after the functions are fetched (unless kept for reuse)."""
    path = os.path.join(directory, hashlib.sha256(cubin).hexdigest()[:24] + ".cubin")
    if not os.path.exists(path):
        with open(path, "wb") as fh:
            fh.write(cubin)
    module = cp.RawModule(path=path)
    functions = {name: module.get_function(name) for name in entries}
    if not keep:
        os.unlink(path)
    return module, functions


def opt_in_shared_memory(functions: Mapping[str, object], launches: tuple[Launch, ...]) -> None:
    for launch in launches:
        if launch.smem_bytes > DEFAULT_DYNAMIC_SMEM:
            functions[launch.kernel].max_dynamic_shared_size_bytes = launch.smem_bytes


def prepare(launches: tuple[Launch, ...], functions: Mapping[str, object]) -> tuple[Prepared, ...]:
    """The launches with their functions looked up and their int arguments as int32, once."""
    return tuple(
        (
            functions[launch.kernel],
            launch.grid,
            launch.block,
            tuple(a if isinstance(a, str) else np.int32(a) for a in launch.args),
            launch.smem_bytes,
        )
        for launch in launches
    )


def bind(prepared: tuple[Prepared, ...], buffers: Mapping[str, object]) -> list[tuple]:
    """(function, grid, block, args, shared memory) per launch, buffer names replaced by what
    `buffers` holds for them: CuPy arrays, or device pointers as Python ints (64-bit)."""
    return [
        (fn, grid, block, tuple(buffers[a] if a.__class__ is str else a for a in spec), smem)
        for fn, grid, block, spec, smem in prepared
    ]


def run(calls: list[tuple], stream=None) -> None:
    """Queue the bound launches on `stream` (a CuPy stream; None: CuPy's current one)."""
    for fn, grid, block, args, smem in calls:
        fn(grid, block, args, shared_mem=smem, stream=stream)
