"""chen_special: Chen et al.'s special-case kernel (C = 1), a sliding register window per thread."""

from __future__ import annotations

from autotune.families.base import Family, KernelPlan, Launch, UnsupportedProblem, cdiv
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

# The K x (K + VEC - 1) register window outgrows the 255 registers of a thread past K = 11.
MAX_K = 11
CONST_BANK_BYTES = 64 * 1024


class ChenSpecial(Family):
    name = "chen_special"
    description = (
        "C = 1: a W x H output tile per block, VEC outputs per thread from a K x (K + VEC - 1) "
        "register window, input rows through shared memory with prefetch, filters in constant "
        "memory"
    )
    paper = "000 (Chen et al., DAC 2017), Algorithm 1"
    default_shape_set = "special"

    def check_limits(self, problem: ConvProblem) -> None:
        if problem.C != 1:
            raise UnsupportedProblem(f"{self.name} computes one input channel, not C={problem.C}")
        if problem.stride != 1:
            raise UnsupportedProblem(f"{self.name} computes stride 1, not {problem.stride}")
        if problem.K > MAX_K:
            raise UnsupportedProblem(
                f"{self.name} keeps a K x (K + VEC - 1) window in registers, which spills past "
                f"K={MAX_K} (got K={problem.K})"
            )
        if problem.F * problem.K * problem.K * 4 > CONST_BANK_BYTES:
            raise UnsupportedProblem(
                f"{self.name} keeps all F*K*K filter words in the 64 KB constant bank; "
                f"F={problem.F}, K={problem.K} need {problem.F * problem.K * problem.K * 4} bytes"
            )

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        w, h, vec = int(config["W"]), int(config["H"]), int(config["VEC"])
        p = problem
        defines = (
            ("B", p.B),
            ("N", p.N),
            ("K", p.K),
            ("F", p.F),
            ("STRIDE", p.stride),
            ("W", w),
            ("H", h),
            ("VEC", vec),
        )
        launch = Launch(
            "chen_special",
            grid=(cdiv(p.N, w), cdiv(p.N, h), p.B),
            block=(w // vec, 1, 1),
            args=("x", "y"),
        )
        return KernelPlan(self.source_path, defines, (launch,), constants=(("c_filter", "w"),))
