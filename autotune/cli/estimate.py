"""How long a run will take, said before it starts, and the ETA of its progress lines."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from autotune.cli.progress import format_duration
from autotune.gpu.timing import TimingPolicy
from autotune.tuning.studies import estimated_cost_s

# Per family, from the H100's protocol-2 records (results/campaigns/; every evaluation of
# 2026-11-24 to 2026-11-27): NVRTC seconds per candidate (mean, 90th percentile) and the wall
# seconds an evaluation took beyond estimated_cost_s (median over studies of the gaps between
# consecutive evaluations of a run, less the GPU estimate: checking, the worker's round trip,
# the store's write, compiles the GPU waited for).
FAMILY_COSTS_S: dict[str, tuple[float, float, float]] = {
    "chen_general": (0.42, 0.65, 0.054),
    "chen_special": (1.86, 6.38, 0.118),
    "conv3d": (0.88, 1.46, 0.050),
    "direct_naive": (0.10, 0.12, 0.032),
    "im2col_gemm": (0.38, 0.57, 0.049),
    "implicit_gemm": (0.44, 0.66, 0.055),
    "maxdnn": (0.70, 1.21, 0.048),
    "sgemm": (0.56, 1.21, 0.083),
    "smem_channels": (0.24, 0.31, 0.056),
    "tc_implicit_gemm": (0.37, 0.57, 0.224),
    "tc_wgmma": (0.33, 0.60, 0.146),
    "tiled2d": (6.99, 18.89, 1.249),
    "winograd": (3.44, 6.91, 0.881),
}
UNKNOWN_FAMILY_COSTS_S = (1.0, 3.0, 0.25)  # a user's family: nothing measured, so on the safe side
STUDY_S = 0.5  # per study: its history read, its strategy set up, its claim taken and released
# A fresh device: the FMA, copy, SGEMM and tensor-core ceilings (about 7 s on the H100).
CEILINGS_S = 10.0
# The first library baseline of a run starts PyTorch and cuDNN in the GPU worker (8 to 22 s on
# the H100); each shape then takes cuDNN's algorithm search and the timing (0.4 s there).
LIBRARY_START_S = 20.0
BASELINE_S = 1.0
# How many seconds of the estimate the first measured ones weigh against: the ETA starts at the
# estimate and moves toward the measured rate as the run goes on.
PRIOR_WEIGHT_S = 20.0


@dataclass(frozen=True, slots=True)
class StudyCost:
    label: str
    evaluations: int  # to run in this run
    # Before its first result: the first compiles, which start together (cold cache).
    first_s: float
    per_evaluation_s: float
    # After its search: its best measured again (the tuner's confirmation), GPU time alone.
    confirm_s: float = 0.0

    @property
    def total_s(self) -> float:
        if not self.evaluations:  # done in an earlier run: only read back
            return 0.0
        return STUDY_S + self.first_s + self.evaluations * self.per_evaluation_s + self.confirm_s


@dataclass(frozen=True, slots=True)
class RunEstimate:
    """Seconds a run is expected to take on an H100-class GPU with a cold cubin cache."""

    measure_s: float  # ceilings and library baselines still missing
    studies: tuple[StudyCost, ...]

    @property
    def evaluations(self) -> int:
        return sum(s.evaluations for s in self.studies)

    @property
    def tuning_s(self) -> float:
        return sum(s.total_s for s in self.studies)

    @property
    def total_s(self) -> float:
        return self.measure_s + self.tuning_s


def study_cost(
    label: str,
    family: str,
    flops: int,
    evaluations: int,
    jobs: int,
    timing: TimingPolicy,
    confirm: bool = False,
) -> StudyCost:
    """An evaluation costs the GPU's part (estimated_cost_s: warm-up, check and samples at an
    assumed 20 TFLOP/s) plus the family's measured overhead, or its compile time shared by the
    compile processes where compiling is the slower. With `confirm`, the best's confirmation
    after the search: one round of measurements of the GPU's part (its kernel is compiled)."""
    # The tuner (and the store under it) loads at a run's start, not at `autotune --help`.
    from autotune.tuning.tuner import CONFIRMED_MEASUREMENTS

    compile_mean, compile_p90, overhead = FAMILY_COSTS_S.get(family, UNKNOWN_FAMILY_COSTS_S)
    gpu_s = estimated_cost_s(flops, 1, timing)
    per = gpu_s + max(overhead, compile_mean / max(1, jobs))
    confirm_s = (CONFIRMED_MEASUREMENTS - 1) * gpu_s if confirm else 0.0
    return StudyCost(label, evaluations, compile_mean, per, confirm_s)


def estimate_run(
    planned,
    jobs: int,
    timing: TimingPolicy,
    ceilings_missing: bool,
    baselines_missing: int,
    confirm: bool = False,
) -> RunEstimate:
    """The estimate of a run from the tuner's plan: (study, target, remaining, cost) tuples;
    with `confirm`, each study searched also has its best measured again (Tuner._confirm)."""
    studies = tuple(
        study_cost(
            study.label, study.family.name, study.problem.flops, remaining, jobs, timing, confirm
        )
        for study, _target, remaining, _cost in planned
    )
    measure_s = (CEILINGS_S if ceilings_missing else 0.0) + (
        LIBRARY_START_S + BASELINE_S * baselines_missing if baselines_missing else 0.0
    )
    return RunEstimate(measure_s, studies)


class Eta:
    """Rewrites each Progress's ETA: the estimate of what is left, scaled by how the run's
    measured time so far compares with the estimate of what it has done (weighted toward 1 at
    the start), so the first line already has one and it converges on the measured rate."""

    def __init__(self, estimate: RunEstimate) -> None:
        self.costs = {s.label: s for s in estimate.studies}
        self.total_s = estimate.tuning_s
        self.done_s = 0.0
        self.started: set[str] = set()

    def __call__(self, p):
        cost = self.costs.get(p.study)
        if cost is not None and p.event == "eval":
            if p.study not in self.started:  # its first result: the study's set-up is behind it
                self.started.add(p.study)
                self.done_s += STUDY_S + cost.first_s
            self.done_s += cost.per_evaluation_s
        elif cost is not None and p.event == "end" and p.study in self.started:
            self.done_s += cost.confirm_s  # its best measured again: done
        scale = (p.elapsed_s + PRIOR_WEIGHT_S) / (self.done_s + PRIOR_WEIGHT_S)
        left = max(0.0, self.total_s - self.done_s) * scale
        return dataclasses.replace(p, eta_s=left)


def plan_estimate(campaign, tuner, budget: int | None) -> RunEstimate:
    """The run's estimate from the tuner's plan and what the store lacks of this device."""
    from autotune.tuning.baselines import baseline_library, missing_ceilings

    store, device_id = campaign.store, tuner.device_id
    ceilings_missing = baselines_missing = 0
    if campaign.baselines:
        ceilings_missing = bool(missing_ceilings(store.ceilings(device=campaign.info.name)["name"]))
        problems = dict.fromkeys(s.problem for s in campaign.studies)
        baselines_missing = sum(
            1
            for p in problems
            if (library := baseline_library(p)) and not store.has_baseline(device_id, library, p)
        )
    planned = tuner.plan(campaign.studies, budget)
    return estimate_run(
        planned, tuner.jobs, tuner.timing, ceilings_missing, baselines_missing, tuner.confirm_best
    )


def describe_estimate(estimate: RunEstimate) -> str:
    """The estimate as the line a run starts with, saying what it is made of."""
    measure = (
        f"{format_duration(estimate.measure_s)} measuring the device and the libraries, "
        if estimate.measure_s
        else ""
    )
    return (
        f"autotune: {estimate.evaluations} evaluations to run, about "
        f"{format_duration(estimate.total_s)} on an H100 with a cold cubin cache ({measure}"
        f"{format_duration(estimate.tuning_s)} tuning and measuring each best again; estimated "
        "from each family's compile "
        "and check times measured on the H100 and each shape's timing cost); the ETA then "
        "follows this run's own pace"
    )


__all__ = [
    "Eta",
    "FAMILY_COSTS_S",
    "RunEstimate",
    "StudyCost",
    "describe_estimate",
    "estimate_run",
    "plan_estimate",
    "study_cost",
]
