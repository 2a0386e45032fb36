"""A kernel family that fails on purpose, one way per FAULT value: used only by tests."""

from __future__ import annotations

from pathlib import Path

from autotune.families.base import Family, KernelPlan, Launch, cdiv
from autotune.families.conv2d import problem_defines
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.model.space import Config

DATA = Path(__file__).parent / "data"

# FAULT value -> (code in the kernel, the status the tool must record)
FAULTS: dict[str, tuple[int, Status]] = {
    "none": (0, Status.OK),
    "slow": (1, Status.OK),
    "wrong": (2, Status.WRONG_RESULT),
    "unwritten": (3, Status.WRONG_RESULT),
    "out_of_bounds": (4, Status.CRASH),
    "hang": (5, Status.TIMEOUT),
    "too_much_smem": (6, Status.RESOURCES),
    "compile_error": (7, Status.COMPILE_ERROR),
    "launch_error": (8, Status.LAUNCH_ERROR),
}
REPEAT = 16
TOO_MUCH_SMEM_BYTES = 1 << 20  # more than any GPU gives a block
GRID_Y_OVER_LIMIT = 65536  # gridDim.y is at most 65535


class FaultInjection(Family):
    name = "fault_injection"
    description = "test-only: hangs, writes out of bounds, returns wrong values, over-asks, fails"
    # Read from a directory of its own, as a family from a user's kernel directory would be.
    directory = DATA

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        fault = str(config["FAULT"])
        code, _ = FAULTS[fault]
        block = int(config["BLOCK"])
        p = problem
        defines = (
            *problem_defines(p),
            ("BLOCK", block),
            ("FAULT", code),
            ("REPEAT", REPEAT),
        )
        grid_y = GRID_Y_OVER_LIMIT if fault == "launch_error" else 1
        smem = TOO_MUCH_SMEM_BYTES if fault == "too_much_smem" else 0
        launch = Launch(
            "fault_injection",
            grid=(cdiv(p.B * p.F * p.N * p.N, block), grid_y, 1),
            block=(block, 1, 1),
            args=("x", "w", "y"),
            smem_bytes=smem,
        )
        return KernelPlan(self.source_path, defines, (launch,))


def expected_status(config: Config) -> Status:
    return FAULTS[str(config["FAULT"])][1]
