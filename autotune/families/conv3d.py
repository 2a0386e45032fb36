"""conv3d: the blog post's single-channel 3D convolution, tiled, coarsened and warp-aware."""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from autotune.families.base import Buffers, Family, KernelPlan, Launch, UnsupportedProblem, cdiv
from autotune.families.files import REFERENCE_DIR
from autotune.model.problem import Conv3dProblem
from autotune.model.space import Config

REFERENCE_SOURCE = REFERENCE_DIR / "reference_conv3d.cu"
REFERENCE_BLOCK = 256
CONST_BANK_BYTES = 64 * 1024
# Shared tiles up to this size are static in the kernel; larger ones are dynamic (opt-in).
STATIC_SMEM_BYTES = 48 * 1024
TUNABLES = (
    "TILE_X",
    "TILE_Y",
    "TILE_Z",
    "COARSEN",
    "COARSEN_AXIS",
    "VEC",
    "USE_SMEM",
    "Z_STEPS",
    "RING",
)
# Depth slices in flight in the ring's shared-memory pipeline (the kernel's STAGES).
RING_STAGES = 3


def problem_defines(p: Conv3dProblem) -> tuple[tuple[str, int], ...]:
    return (("D", p.D), ("R", p.R), ("Cc", p.Cc), ("Kd", p.Kd), ("Kr", p.Kr), ("Kc", p.Kc))


def per_thread(config: Config) -> tuple[int, int, int]:
    """Outputs a thread computes along (depth, rows, columns)."""
    coarsen, axis, vec = int(config["COARSEN"]), int(config["COARSEN_AXIS"]), int(config["VEC"])
    return (
        coarsen if axis == 2 else 1,
        coarsen if axis == 1 else 1,
        coarsen if axis == 0 else vec,
    )


def output_tile(config: Config) -> tuple[int, int, int]:
    """A block's output tile along (depth, rows, columns)."""
    cz, cy, cx = per_thread(config)
    return int(config["TILE_Z"]) * cz, int(config["TILE_Y"]) * cy, int(config["TILE_X"]) * cx


def tile_bytes(problem: Conv3dProblem, config: Config) -> int:
    """Shared memory of a block: the input window behind its tile (the kernel's TILE_FLOATS),
    twice when it walks several tiles (double buffering); with the depth ring, RING_STAGES
    single depth slices of it."""
    if not int(config["USE_SMEM"]):
        return 0
    oz, oy, ox = output_tile(config)
    pitch = ox + cdiv(problem.Kc - 1, 4) * 4  # rows padded to 16 bytes
    plane = (oy + problem.Kr - 1) * pitch * 4
    if int(config["RING"]):
        return RING_STAGES * plane
    buffers = 2 if int(config["Z_STEPS"]) > 1 else 1
    return buffers * (oz + problem.Kd - 1) * plane


class Conv3d(Family):
    name = "conv3d"
    description = (
        "valid single-channel 3D convolution: a TILE_X x TILE_Y x TILE_Z thread block per output "
        "tile, input window in shared memory (or read from global), filter in constant memory; "
        "each thread COARSEN outputs along COARSEN_AXIS (the warp-aware 32 x 16 block coarsened "
        "along depth among them) times VEC columns read as vectors; a block walks Z_STEPS tiles "
        "down the depth, copying the next tile (cp.async) while computing the current one; "
        "with RING, a flat block streams depth slices through shared memory and each thread keeps "
        "Kd output depths as a ring of accumulators, so no depth halo is re-read"
    )
    paper = "004 (LeetGPU blog), tiled, coarsened and warp-aware Conv3d"
    reference_sources = (REFERENCE_SOURCE,)
    problem_type = Conv3dProblem
    layout = "input D x R x Cc, filter Kd x Kr x Kc, output (D-Kd+1) x (R-Kr+1) x (Cc-Kc+1)"
    default_shape_set = "conv3d"
    # Configurations stored before the ring existed ran the kernel without it.
    later_tunables = MappingProxyType({"RING": 0})

    def check_limits(self, problem: Conv3dProblem) -> None:
        taps = problem.Kd * problem.Kr * problem.Kc
        if taps * 4 > CONST_BANK_BYTES:
            raise UnsupportedProblem(
                f"{self.name} keeps the filter in the 64 KB constant bank; {problem.Kd} x "
                f"{problem.Kr} x {problem.Kc} taps need {taps * 4} bytes"
            )

    def buffers(self, problem: Conv3dProblem) -> Buffers:
        return Buffers(
            inputs=(("x", problem.input_shape), ("w", problem.filter_shape)),
            outputs=(("y", problem.output_shape),),
        )

    def reference_plan(self, problem: Conv3dProblem) -> KernelPlan:
        """Float64 direct 3D convolution, writing 'y_ref' (double); one thread per output."""
        launch = Launch(
            "reference_conv3d",
            grid=(cdiv(problem.outputs, REFERENCE_BLOCK), 1, 1),
            block=(REFERENCE_BLOCK, 1, 1),
            args=("x", "w", "y_ref"),
        )
        return KernelPlan(REFERENCE_SOURCE, problem_defines(problem), (launch,))

    def plan(self, problem: Conv3dProblem, config: Config) -> KernelPlan:
        config = self.complete(config)
        tunables = tuple((name, int(config[name])) for name in TUNABLES)
        oz, oy, ox = output_tile(config)
        smem = tile_bytes(problem, config)
        depth_blocks = cdiv(cdiv(problem.OD, oz), int(config["Z_STEPS"]))
        launch = Launch(
            "conv3d",
            grid=(cdiv(problem.OC, ox), cdiv(problem.OR, oy), depth_blocks),
            block=(int(config["TILE_X"]), int(config["TILE_Y"]), int(config["TILE_Z"])),
            args=("x", "y"),
            smem_bytes=smem if smem > STATIC_SMEM_BYTES else 0,
        )
        return KernelPlan(
            self.source_path,
            (*problem_defines(problem), *tunables),
            (launch,),
            constants=(("c_filter", "w"),),
        )


def reference_numpy(problem: Conv3dProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Float64 reference on the CPU, for small problems and for checking the GPU reference."""
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), problem.filter_shape)
    return np.einsum("zyxijk,ijk->zyx", windows, w.astype(np.float64), optimize=True)
