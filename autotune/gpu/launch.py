"""Loading cubins and launching a plan's kernels: what the GPU session and the runtime share.

Both load cubins and read the device's limits the same way. The session binds a plan's
launches to the CuPy arrays of one evaluation (prepare, bind, run); the runtime
(autotune.runtime) launches the same Launch descriptions through the driver with argument
storage made once (DriverLaunch), since it pays the host cost on every call.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from collections.abc import Mapping

import numpy as np

from autotune.families.plan import Launch, TensorMap
from autotune.gpu.tensor_map import EncodedMap, MapSlot
from autotune.model.space import DeviceLimits

try:
    import cupy as cp
    from cupy.cuda.function import CPointer
except ImportError:  # pragma: no cover - cupy is a dependency; without it there is no GPU path
    cp = None
    CPointer = object

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
# the spec holds buffer names and tensor maps of buffers (bound per call) and int32 values
# (fixed).
Prepared = tuple


def attribute(device_index: int, name: str) -> int:
    return int(cp.cuda.runtime.deviceGetAttribute(CUDA_ATTR[name], device_index))


_SM_COUNTS: dict[int, int] = {}


def device_grid(launch: Launch) -> tuple[int, int, int]:
    """The grid `launch` runs with on the current device: a persistent launch's x capped by the
    device's multiprocessors (Launch.grid_on), counted once per device."""
    if not launch.blocks_per_sm:
        return launch.grid
    device = cp.cuda.runtime.getDevice()
    count = _SM_COUNTS.get(device)
    if count is None:
        count = _SM_COUNTS[device] = attribute(device, "MultiProcessorCount")
    return launch.grid_on(count)


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
            device_grid(launch),
            launch.block,
            tuple(a if isinstance(a, (str, TensorMap)) else np.int32(a) for a in launch.args),
            launch.smem_bytes,
        )
        for launch in launches
    )


def bind(prepared: tuple[Prepared, ...], buffers: Mapping[str, object]) -> list[tuple]:
    """(function, grid, block, args, shared memory) per launch, buffer names replaced by what
    `buffers` holds for them: CuPy arrays, or device pointers as Python ints (64-bit); tensor
    maps encoded for their buffer's address."""
    return [
        (fn, grid, block, tuple(_bound(a, buffers) for a in spec), smem)
        for fn, grid, block, spec, smem in prepared
    ]


def _bound(arg, buffers: Mapping[str, object]):
    if arg.__class__ is str:
        return buffers[arg]
    if arg.__class__ is TensorMap:
        return MapArgument(arg, buffers[arg.buffer])
    return arg


class MapArgument(CPointer):
    """A tensor map as a kernel argument of CuPy's launch: CuPy hands a CPointer's address to
    the driver as the argument's storage, and the driver copies the map's 128 bytes from it."""

    def __init__(self, spec: TensorMap, buffer) -> None:
        address = buffer if isinstance(buffer, int) else buffer.data.ptr
        self.encoded = EncodedMap(spec, address)  # the storage the pointer points into
        super().__init__(self.encoded.pointer)


def run(calls: list[tuple], stream=None) -> None:
    """Queue the bound launches on `stream` (a CuPy stream; None: CuPy's current one)."""
    for fn, grid, block, args, smem in calls:
        fn(grid, block, args, shared_mem=smem, stream=stream)


# ---------------------------------------------------------------------------------------------
# Launches through the driver, for the runtime's per-call path: CuPy's Function call converts
# every argument on every call (6.4 us a launch with int pointers on the H100 host, 41 us with
# CuPy arrays); here the argument storage is made once and a call writes the pointers into it,
# then calls cuLaunchKernel through CuPy's compiled binding (cupy_backends), which takes plain
# Python ints: a ctypes call builds its foreign-call description on every call
# (results/h200/20261130e/README.md measures both on the H200's host).

_DRIVER = None


def _driver():
    """libcuda through ctypes, for what CuPy's binding lacks: the copy into a __constant__
    symbol and error names."""
    global _DRIVER
    if _DRIVER is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuMemcpyDtoDAsync_v2.argtypes = [
            ctypes.c_uint64,
            ctypes.c_uint64,
            ctypes.c_size_t,
            ctypes.c_void_p,
        ]
        lib.cuMemcpyDtoDAsync_v2.restype = ctypes.c_int
        _DRIVER = lib
    return _DRIVER


def _launch_kernel():
    """cuLaunchKernel as CuPy's binding has it, (function, grid x y z, block x y z, dynamic
    shared memory, stream, kernel parameters, extra) all ints, and the error it raises (CuPy's
    CUDADriverError, whose message names the driver's error)."""
    from cupy_backends.cuda.api import driver

    return driver.launchKernel, driver.CUDADriverError


class DriverError(RuntimeError):
    """A CUDA driver call failed; the message holds its error name."""


def _raise(code: int, what: str) -> None:
    name = ctypes.c_char_p()
    _driver().cuGetErrorName(code, ctypes.byref(name))
    text = name.value.decode() if name.value else f"error {code}"
    raise DriverError(f"{what}: {text}")


class DriverLaunch:
    """One prepared launch: buffer arguments are 64-bit slots written per call, int arguments
    32-bit values written once, tensor maps encoded once per buffer address (gpu/tensor_map.py's
    MapSlot) and the argument list pointed at the call's."""

    __slots__ = (
        "fn",
        "dims",
        "slots",
        "maps",
        "_values",
        "params",
        "_params",
        "_launch",
        "_failed",
    )

    def __init__(self, function, launch: Launch) -> None:
        # The CUfunction: RawModule.get_function gives a RawKernel, whose `kernel` is the
        # cupy.cuda.function.Function that holds the handle.
        self.fn = getattr(function, "kernel", function).ptr
        grid = device_grid(launch)
        self.dims = tuple(int(d) for d in (*grid, *launch.block, launch.smem_bytes))
        values, slots, maps, pointers = [], [], [], []
        for arg in launch.args:
            if isinstance(arg, TensorMap):
                slot = MapSlot(arg)
                maps.append((arg.buffer, slot, len(pointers)))
                pointers.append(None)  # the map's address, known once it is first encoded
                continue
            if isinstance(arg, str):
                value = ctypes.c_uint64(0)
                slots.append((arg, value))
            else:
                value = ctypes.c_int32(int(arg))
            values.append(value)
            pointers.append(ctypes.addressof(value))
        self.slots = tuple(slots)
        self.maps = tuple(maps)
        self._values = values  # the storage params points into
        self.params = (ctypes.c_void_p * len(pointers))(*pointers)
        self._params = ctypes.addressof(self.params)
        self._launch, self._failed = _launch_kernel()

    def __call__(self, buffers: Mapping[str, int], stream: int) -> None:
        for name, slot in self.slots:
            slot.value = buffers[name]
        for name, slot, index in self.maps:
            self.params[index] = slot.bind(buffers[name])
        try:
            self._launch(self.fn, *self.dims, stream, self._params, 0)
        except self._failed as err:
            raise DriverError(f"launch of {self.fn:#x}: {err}") from None


class DriverCopy:
    """A device-to-device copy of a buffer into a fixed address (a __constant__ symbol)."""

    __slots__ = ("target", "source", "nbytes", "_copy")

    def __init__(self, target: int, source: str, nbytes: int) -> None:
        self.target, self.source, self.nbytes = target, source, nbytes
        self._copy = _driver().cuMemcpyDtoDAsync_v2

    def __call__(self, buffers: Mapping[str, int], stream: int) -> None:
        code = self._copy(self.target, buffers[self.source], self.nbytes, stream)
        if code:
            _raise(code, "copy into constant memory")


class CupyLaunch:
    """One prepared launch through CuPy's Function call, on the stream a call names by its
    handle: the launch the GPU session makes (prepare, bind, run), one launch at a time."""

    __slots__ = ("prepared",)

    def __init__(self, function, launch: Launch) -> None:
        self.prepared = prepare((launch,), {launch.kernel: function})

    def __call__(self, buffers: Mapping[str, int], stream: int) -> None:
        run(bind(self.prepared, buffers), external_stream(stream))


class CupyCopy:
    """A device-to-device copy of a buffer into a fixed address, through CuPy's runtime."""

    __slots__ = ("target", "source", "nbytes")

    def __init__(self, target: int, source: str, nbytes: int) -> None:
        self.target, self.source, self.nbytes = target, source, nbytes

    def __call__(self, buffers: Mapping[str, int], stream: int) -> None:
        cp.cuda.runtime.memcpyAsync(self.target, buffers[self.source], self.nbytes, 3, stream)


_STREAMS: dict[tuple[int, int], object] = {}


def external_stream(handle: int):
    """A CuPy stream object for a cudaStream_t handle of the caller's (made once per handle)."""
    device = cp.cuda.runtime.getDevice()
    found = _STREAMS.get((handle, device))
    if found is None:
        import warnings

        with warnings.catch_warnings():
            # CuPy 14 prefers Stream.from_external(an object with __cuda_stream__); a bare
            # handle, as PyTorch's raw stream query gives, needs ExternalStream.
            warnings.simplefilter("ignore", DeprecationWarning)
            found = _STREAMS[(handle, device)] = cp.cuda.ExternalStream(handle, device)
    return found


# How the runtime launches: "cupy" (CuPy's Function call; verified on the H100) or "driver"
# (cuLaunchKernel with argument storage made once; less host time a launch).
LAUNCHERS = {"cupy": (CupyLaunch, CupyCopy), "driver": (DriverLaunch, DriverCopy)}
