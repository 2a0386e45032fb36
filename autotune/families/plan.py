"""Launch plans: what a family hands the compiler and the evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autotune.model.space import Config, Value


@dataclass(frozen=True, slots=True)
class TensorMap:
    """A TMA tensor map of a buffer, passed by value (a 128-byte `__grid_constant__`
    CUtensorMap). It holds the buffer's address, so the launcher encodes it when it binds the
    buffer (autotune.gpu.tensor_map). Extents and strides run innermost first, as the driver
    takes them; `strides` are in bytes, one fewer than `dims` (the innermost is the element).

    Tiled (`corners` empty): each copy loads a box of `box` elements. Im2col (`corners` =
    (lower, upper) of the pixel box over the spatial dimensions, the upper relative to the far
    edge): each copy loads `box` = (channels a pixel, pixels) from consecutive filter-window
    origins, the traversal stepping by `element_strides` over the spatial dimensions."""

    buffer: str
    dtype: str  # storage type: "float32", "float16" or "bfloat16"
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    swizzle_bytes: int = 128  # 0 (none), 32, 64 or 128: the shared-memory swizzle of a copy
    corners: tuple[tuple[int, ...], tuple[int, ...]] | tuple[()] = ()

    @property
    def im2col(self) -> bool:
        return bool(self.corners)


class TensorMapError(ValueError):
    """A tensor map the driver would refuse, or the driver refused."""


# Enumerations of cuda.h (CUtensorMapDataType, CUtensorMapSwizzle): what an encoder passes the
# driver, in Python (gpu/tensor_map.py) or in an exported C++ tree (export/).
TMA_DATA_TYPES = {"float16": 6, "float32": 7, "bfloat16": 9}
TMA_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
_ELEMENT_BYTES = {"float16": 2, "float32": 4, "bfloat16": 2}
MAX_BOX = 256  # extent of a box dimension, and pixels or channels of an im2col copy
MAX_RANK = 5
IM2COL_CORNER_REACH = {3: 2**15, 4: 2**7, 5: 2**4}  # by rank: corners in -reach..reach - 1


def check_tensor_map(spec: TensorMap) -> None:
    """TensorMapError where `spec` breaks a rule of the driver's encoders that does not depend
    on the address (that one: 16-byte alignment), so that a plan that breaks one fails with a
    sentence rather than CUDA_ERROR_INVALID_VALUE."""
    name = f"tensor map of {spec.buffer}"
    rank = len(spec.dims)
    if spec.dtype not in TMA_DATA_TYPES:
        raise TensorMapError(f"{name}: no TMA data type for {spec.dtype!r}")
    if not (3 if spec.im2col else 1) <= rank <= MAX_RANK:
        raise TensorMapError(f"{name}: rank {rank} is outside what TMA copies")
    if len(spec.strides) != rank - 1 or len(spec.element_strides) != rank:
        raise TensorMapError(f"{name}: {rank} dimensions need {rank - 1} strides")
    if any(s % 16 for s in spec.strides):
        raise TensorMapError(f"{name}: strides {spec.strides} are not multiples of 16 bytes")
    if any(not 1 <= e <= 8 for e in spec.element_strides):
        raise TensorMapError(f"{name}: element strides must be 1 to 8")
    if spec.swizzle_bytes not in TMA_SWIZZLES:
        raise TensorMapError(f"{name}: no {spec.swizzle_bytes}-byte swizzle")
    if spec.im2col:
        if len(spec.box) != 2 or any(len(c) != rank - 2 for c in spec.corners):
            raise TensorMapError(
                f"{name}: im2col takes (channels, pixels) and a corner per spatial dimension"
            )
        # The corners' range shrinks with the spatial dimensions (cuTensorMapEncodeIm2col):
        # 16, 8 or 5 bits for one, two or three.
        reach = IM2COL_CORNER_REACH[rank]
        if any(not -reach <= v < reach for corner in spec.corners for v in corner):
            raise TensorMapError(
                f"{name}: im2col corners {spec.corners} outside {-reach}..{reach - 1}"
            )
    elif len(spec.box) != rank:
        raise TensorMapError(f"{name}: a box extent per dimension")
    if any(not 1 <= b <= MAX_BOX for b in spec.box):
        raise TensorMapError(f"{name}: box {spec.box} has an extent outside 1..{MAX_BOX}")
    inner = spec.box[0] * _ELEMENT_BYTES[spec.dtype]
    if inner % 16 or (spec.swizzle_bytes and inner > spec.swizzle_bytes):
        raise TensorMapError(
            f"{name}: the innermost box is {inner} bytes: it must be whole 16-byte chunks, "
            f"and with a {spec.swizzle_bytes}-byte swizzle at most that"
        )


# A buffer name, an int passed by value as a 32-bit integer, or a tensor map of a buffer.
Arg = str | int | TensorMap


@dataclass(frozen=True, slots=True)
class Launch:
    kernel: str  # extern "C" entry name
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Arg, ...]
    smem_bytes: int = 0  # dynamic shared memory
    # A persistent launch (> 0): at most this many blocks a multiprocessor along x, each
    # walking the work blockIdx.x, blockIdx.x + gridDim.x, ... of `grid`'s x extent. The
    # launcher, which knows the device, caps it (grid_on); a launcher that does not stays
    # correct, since the kernel strides by gridDim.x.
    blocks_per_sm: int = 0
    # Blocks a thread-block cluster along x, fixed by the kernel (__cluster_dims__): `grid`'s x
    # extent is a multiple of it, and so is a persistent launch's cap.
    cluster: int = 1

    def __post_init__(self) -> None:
        if self.cluster < 1 or self.grid[0] % self.cluster:
            raise ValueError(
                f"{self.kernel}: grid {self.grid} is not whole clusters of {self.cluster}"
            )

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def grid_on(self, sm_count: int) -> tuple[int, int, int]:
        """The grid to launch on a device of `sm_count` multiprocessors."""
        if not self.blocks_per_sm:
            return self.grid
        x, y, z = self.grid
        resident = self.blocks_per_sm * sm_count
        return (min(x, resident - resident % self.cluster), y, z)


Shape = tuple[int, ...]
SCRATCH_BYTES = 4  # a plan's scratch buffers are FP32
COUNTER_BYTES = 4  # a plan's counters are uint32


@dataclass(frozen=True, slots=True)
class KernelPlan:
    """One compile unit and the launches that make up one timed run of it.

    `launches` are the timed run. Outside the timed region: `setup` runs once before the first
    run (layout conversion of the inputs into scratch buffers, declared by the family), then
    `constants` copy a buffer (an input, or a scratch table that setup filled) into a
    __constant__ symbol, and `finish` runs once after the checked run, before the check
    (conversion of a scratch output back into the problem's output layout). `scratch` buffers
    are FP32 arrays of the plan's own, poisoned with NaN; their bytes are the extra memory the
    algorithm needs. `arch_specific` asks for the architecture-specific target (sm_90a on an
    sm_90 compiler), which instructions such as wgmma and setmaxnreg need; the cubin then runs
    on that architecture only. `ptxas_options` are passed to the PTX assembler for this plan
    (-Xptxas=<option> each; keyed in the cubin cache, written into an export's build rule).

    `counters` are buffers of uint32 counters (a stream-K fix-up's arrivals), named by launch
    arguments as any buffer: they are zero before the plan's first run and every run leaves
    them zero (the last to arrive at a counter resets it). So a caller zeroes them once, when
    it allocates them, keeps them apart from scratch (which any plan may write), and may share
    one counters region between plans run in order on one stream, each plan's counters
    starting at offset 0 of it.
    """

    source: Path
    defines: tuple[tuple[str, Value], ...]
    launches: tuple[Launch, ...]
    constants: tuple[tuple[str, str], ...] = ()
    scratch: tuple[tuple[str, Shape], ...] = ()
    setup: tuple[Launch, ...] = ()
    finish: tuple[Launch, ...] = ()
    arch_specific: bool = False
    ptxas_options: tuple[str, ...] = ()
    counters: tuple[tuple[str, int], ...] = ()  # (buffer name, number of uint32 counters)

    @property
    def entries(self) -> tuple[str, ...]:
        every = (*self.setup, *self.launches, *self.finish)
        return tuple(dict.fromkeys(launch.kernel for launch in every))

    @property
    def all_launches(self) -> tuple[Launch, ...]:
        return (*self.setup, *self.launches, *self.finish)

    @property
    def scratch_bytes(self) -> int:
        return sum(SCRATCH_BYTES * _elements(shape) for _, shape in self.scratch)

    @property
    def counter_bytes(self) -> int:
        return sum(COUNTER_BYTES * count for _, count in self.counters)

    @property
    def extra_bytes(self) -> int:
        """Device memory the plan needs beyond its problem's buffers: scratch and counters."""
        return self.scratch_bytes + self.counter_bytes


def _elements(shape: Shape) -> int:
    count = 1
    for extent in shape:
        count *= extent
    return count


@dataclass(frozen=True, slots=True)
class Buffers:
    """Device buffers of a problem: inputs get fresh random values, outputs are checked. All of
    them hold the problem's storage type (`dtype`, a name of model/precision.py: fp32 and tf32
    store float32, bf16 and fp16 their 16-bit types)."""

    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    dtype: str = "fp32"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tiled_threads(config: Config | Mapping[str, int]) -> int:
    """Threads of a block of a register-tiled GEMM: one per TM x TN tile of its BM x BN tile."""
    return (int(config["BM"]) // int(config["TM"])) * (int(config["BN"]) // int(config["TN"]))


REDUCE_BLOCK = 256  # threads of every split-K reduction kernel (REDUCE_BLOCK in its .cu)


def split_k_plan(
    source: Path,
    defines: tuple[tuple[str, Value], ...],
    gemm: Launch,
    split: int,
    reduce_entry: str,
    partial_shape: Shape,
    partial: str = "y_split",
    output: str = "y",
    arch_specific: bool = False,
    reduce_inputs: tuple[str, ...] = (),
) -> KernelPlan:
    """The plan of a GEMM launch writing `output` (split == 1) or, split along the reduction,
    FP32 partial sums into the scratch `partial` (split x partial_shape) that a second timed
    kernel, `reduce_entry`, adds up into `output` (taking `reduce_inputs` after it: a fused
    epilogue's inputs)."""
    if split == 1:
        return KernelPlan(source, defines, (gemm,), arch_specific=arch_specific)
    reduce = Launch(
        reduce_entry,
        grid=(cdiv(_elements(partial_shape), REDUCE_BLOCK), 1, 1),
        block=(REDUCE_BLOCK, 1, 1),
        args=(partial, output, *reduce_inputs),
    )
    return KernelPlan(
        source,
        defines,
        (gemm, reduce),
        scratch=((partial, (split, *partial_shape)),),
        arch_specific=arch_specific,
    )
