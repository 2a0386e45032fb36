"""smem_channels: the course report's shared-memory convolution, channel groups added by atomics."""

from __future__ import annotations

from autotune.families import conv2d
from autotune.families.base import Buffers, Family, KernelPlan, Launch, cdiv
from autotune.families.files import REFERENCE_DIR
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

REFERENCE_SOURCE = REFERENCE_DIR / "reference_conv2d_bias.cu"
# Block size of the elementwise launches (zeroing y, adding the bias); not tuned: both are a
# plain pass over y at whatever rate the memory allows.
ELEMENTWISE_BLOCK = 256


class SmemChannels(Family):
    name = "smem_channels"
    description = (
        "a TILE_W x TILE_H output tile per block for FILTERS_PER_BLOCK filters over one group of "
        "CH_PER_BLOCK input channels, input tiles in shared memory loaded in strips of THREADS_Y "
        "rows; groups combined by atomicAdd into a y zeroed in the timed run, bias (constant "
        "memory) added by a separate kernel; time = zero + convolution + bias launches"
    )
    paper = "001 (course report), shared-memory convolution parallel across channels"
    reference_sources = (REFERENCE_SOURCE,)
    layout = "NCHW input, FCKK filters, NFHW output, bias (F,)"
    default_shape_set = "general"

    def buffers(self, problem: ConvProblem) -> Buffers:
        # The report's layer has a bias; ConvProblem has none, so the family brings its own input.
        # DESIGN counts no FLOPs for it, so problem.flops stays the convolution's.
        plain = conv2d.buffers(problem)
        return Buffers(inputs=(*plain.inputs, ("bias", (problem.F,))), outputs=plain.outputs)

    def reference_plan(self, problem: ConvProblem) -> KernelPlan:
        """Float64 convolution plus bias, writing 'y_ref' (double); one thread per output."""
        outputs = problem.B * problem.F * problem.N * problem.N
        launch = Launch(
            "reference_conv2d_bias",
            grid=(cdiv(outputs, conv2d.REFERENCE_BLOCK), 1, 1),
            block=(conv2d.REFERENCE_BLOCK, 1, 1),
            args=("x", "w", "bias", "y_ref"),
        )
        return KernelPlan(REFERENCE_SOURCE, conv2d.problem_defines(problem), (launch,))

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        p = problem
        tile_w, tile_h = int(config["TILE_W"]), int(config["TILE_H"])
        threads_y = int(config["THREADS_Y"])
        ch_per_block, ch_stage = int(config["CH_PER_BLOCK"]), int(config["CH_STAGE"])
        fpb = int(config["FILTERS_PER_BLOCK"])
        filter_in_smem = int(config["FILTER_IN_SMEM"])
        defines = (
            *conv2d.problem_defines(p),
            ("TILE_W", tile_w),
            ("TILE_H", tile_h),
            ("THREADS_Y", threads_y),
            ("CH_PER_BLOCK", ch_per_block),
            ("CH_STAGE", ch_stage),
            ("FILTERS_PER_BLOCK", fpb),
            ("FILTER_IN_SMEM", filter_in_smem),
        )
        outputs = p.B * p.F * p.N * p.N
        elementwise_grid = (cdiv(outputs, ELEMENTWISE_BLOCK), 1, 1)
        tiles = cdiv(p.N, tile_w) * cdiv(p.N, tile_h)
        groups = cdiv(p.C, ch_per_block)
        launches = (
            Launch("smem_channels_zero", elementwise_grid, (ELEMENTWISE_BLOCK, 1, 1), ("y",)),
            Launch(
                "smem_channels",
                grid=(tiles * groups, cdiv(p.F, fpb), p.B),
                block=(tile_w, threads_y, 1),
                args=("x", "w", "y"),
            ),
            Launch("smem_channels_bias", elementwise_grid, (ELEMENTWISE_BLOCK, 1, 1), ("y",)),
        )
        return KernelPlan(self.source_path, defines, launches, constants=(("c_bias", "bias"),))
