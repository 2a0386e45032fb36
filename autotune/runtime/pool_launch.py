"""The runtime's max pooling of channels-last tensors (pool.cu): which poolings it serves, the
kernel's entry and arguments for one, and its launch, compiled once a device and prepared once
a shape. Planning needs no GPU; launching imports CuPy's runtime on first use."""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass

from autotune import package_path
from autotune.families.plan import Launch, cdiv

POOL_SOURCE = package_path("autotune.runtime", "pool.cu")
POOL_ENTRIES = {  # a storage type's entry, which walks any window at run time
    "float32": "max_pool_nhwc_f32",
    "bfloat16": "max_pool_nhwc_bf16",
    "float16": "max_pool_nhwc_f16",
}
UNROLLED_WINDOWS = ((2, 2), (3, 3))  # windows with entries of their own (entry + "_3x3")
ALL_ENTRIES = tuple(
    entry + suffix
    for entry in POOL_ENTRIES.values()
    for suffix in ("", *(f"_{kh}x{kw}" for kh, kw in UNROLLED_WINDOWS))
)
ELEMENT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
CHUNK_BYTES = 16  # what a thread reads of a pixel: 8 16-bit or 4 FP32 channels
POOL_BLOCK = 256
BLOCKS_PER_SM = 32  # the grid's cap (threads stride over the rest)
INDEX_LIMIT = 2**31  # the kernel indexes chunks in 32 bits


@dataclass(frozen=True, slots=True)
class Pooling:
    """A max pooling of a (batch, channels, height, width) channels-last tensor: window, stride
    and padding as (rows, columns); no dilation, the output's size rounded down (PyTorch's
    defaults)."""

    storage: str  # "float32", "bfloat16" or "float16"
    batch: int
    channels: int
    height: int
    width: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]

    @property
    def out_size(self) -> tuple[int, int]:
        (kh, kw), (sh, sw), (ph, pw) = self.kernel, self.stride, self.padding
        return (self.height + 2 * ph - kh) // sh + 1, (self.width + 2 * pw - kw) // sw + 1

    @property
    def chunks(self) -> int:
        """16-byte chunks a pixel."""
        return self.channels * ELEMENT_BYTES[self.storage] // CHUNK_BYTES

    def refusal(self) -> str | None:
        """Why the kernel does not serve this pooling (PyTorch's then does), None where it does."""
        if self.storage not in POOL_ENTRIES:
            return f"no kernel for {self.storage}"
        if (self.channels * ELEMENT_BYTES[self.storage]) % CHUNK_BYTES:
            return "a pixel is not whole 16-byte chunks"
        if min(*self.kernel, *self.stride) < 1 or min(self.padding) < 0:
            return "a window, stride or padding out of range"
        if any(2 * p > k for p, k in zip(self.padding, self.kernel, strict=True)):
            return "padding over half the window"
        if min(self.out_size) < 1:
            return "no output"
        pixels = self.batch * max(self.height * self.width, self.out_size[0] * self.out_size[1])
        if pixels * self.chunks >= INDEX_LIMIT:
            return "too large for 32-bit indices"
        return None

    @property
    def entry(self) -> str:
        """The kernel's entry: the window's own where it has one (its loads all issued at once)."""
        if self.kernel in UNROLLED_WINDOWS:
            return f"{POOL_ENTRIES[self.storage]}_{self.kernel[0]}x{self.kernel[1]}"
        return POOL_ENTRIES[self.storage]

    def launch(self, sm_count: int) -> Launch:
        """The kernel's launch: buffers "x" (input) and "y" (output), a thread an output chunk."""
        out_h, out_w = self.out_size
        total = self.batch * out_h * out_w * self.chunks
        grid = (max(1, min(cdiv(total, POOL_BLOCK), BLOCKS_PER_SM * sm_count)), 1, 1)
        args = ("x", "y", self.height, self.width, self.chunks, out_h, out_w)
        args += (*self.kernel, *self.stride, *self.padding, total)
        return Launch(self.entry, grid, (POOL_BLOCK, 1, 1), args)


class PoolLaunches:
    """The kernel's launches, each prepared once per (device, pooling); one call at a time
    writes a launch's argument slots."""

    def __init__(self) -> None:
        self._functions: dict[int, dict] = {}  # by device
        self._launches: dict[tuple[int, Pooling], object] = {}
        self._lock = threading.Lock()
        self._directory: tempfile.TemporaryDirectory | None = None

    def prepared(self, pooling: Pooling, device: int) -> bool:
        """Whether `pooling` has its launch on `device` (then nothing is compiled or loaded)."""
        return (device, pooling) in self._launches

    def run(self, pooling: Pooling, device: int, x: int, y: int, stream: int) -> None:
        """Queue `pooling` of the input at address x into the output at y on `stream`."""
        with self._lock:
            launch = self._launches.get((device, pooling))
            if launch is None:
                launch = self._launches[(device, pooling)] = self._prepare(pooling, device)
            launch({"x": x, "y": y}, stream)

    def _prepare(self, pooling: Pooling, device: int):
        import cupy as cp

        from autotune.gpu.compiler import DEFAULT_CACHE, Compiler
        from autotune.gpu.launch import LAUNCHERS, device_arch, device_limits, load_module
        from autotune.runtime.calls import DEFAULT_LAUNCHER

        with cp.cuda.Device(device):
            functions = self._functions.get(device)
            if functions is None:
                compiler = Compiler(
                    arch=device_arch(device), cache_dir=DEFAULT_CACHE, in_children=True
                )
                compiled = compiler.compile_source(POOL_SOURCE, ())
                compiler.stop_pool()
                if self._directory is None:
                    self._directory = tempfile.TemporaryDirectory(prefix="autotune-pool-")
                _, functions = load_module(compiled.cubin, ALL_ENTRIES, self._directory.name, False)
                self._functions[device] = functions
            spec = pooling.launch(device_limits(device).SM_COUNT)
            return LAUNCHERS[DEFAULT_LAUNCHER][0](functions[spec.kernel], spec)


POOL_LAUNCHES = PoolLaunches()
