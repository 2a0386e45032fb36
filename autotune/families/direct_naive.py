"""direct_naive: one thread per output element, the baseline every family is measured against."""

from __future__ import annotations

from autotune.families.base import Family, KernelPlan, Launch, cdiv
from autotune.families.conv2d import problem_defines
from autotune.model.problem import ConvProblem
from autotune.model.space import Config


class DirectNaive(Family):
    name = "direct_naive"
    description = (
        "one thread per output element looping over C, K, K; filters in global or constant memory"
    )
    paper = "001 (course report), naive convolution"
    default_shape_set = "general"

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        bx, by = int(config["BLOCK_X"]), int(config["BLOCK_Y"])
        in_const = int(config["FILTER_IN_CONST"])
        p = problem
        defines = (
            *problem_defines(p),
            ("BLOCK_X", bx),
            ("BLOCK_Y", by),
            ("FILTER_IN_CONST", in_const),
        )
        launch = Launch(
            "direct_naive",
            grid=(cdiv(p.N, bx), cdiv(p.N, by), p.B * p.F),
            block=(bx, by, 1),
            args=("x", "w", "y"),
        )
        constants = (("c_filter", "w"),) if in_const else ()
        return KernelPlan(self.source_path, defines, (launch,), constants)
