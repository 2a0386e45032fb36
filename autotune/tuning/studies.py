"""Studies: (family, problem) pairs bound to a device, their budgets, outcomes and job costs."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.families import Family, UnsupportedProblem
from autotune.gpu.compiler import CompiledKernel
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import Problem
from autotune.model.records import Measurement
from autotune.model.space import BoundSpace, Config, DeviceLimits
from autotune.replay.subspaces import restrict

# A job's timeout: the floor covers what any job may spend besides its runs (module load, a fresh
# worker's first-use compiles of CuPy's kernels); the runs are priced at the slower of a rate no
# sane candidate falls below and a multiple of the best time so far; the ceiling bounds what one
# hung candidate can cost.
JOB_TIMEOUT_FLOOR_S = 15.0
JOB_TIMEOUT_CEILING_S = 180.0
SLOWEST_FLOPS_PER_S = 20e9  # ~1/3000 of an H100's FP32 peak
SLOWEST_VS_BEST = 50.0
REFERENCE_FLOPS_PER_S = 100e9  # the float64 reference that checks every job


def job_timeout_s(flops: int, timing: TimingPolicy, best_ms: float | None = None) -> float:
    """Seconds to wait for one job before the worker is declared hung and replaced. A job is one
    checked run, the warm-up runs and samples until timing.max_time_s (plus the run in flight)."""
    run_s = flops / SLOWEST_FLOPS_PER_S
    if best_ms is not None:
        run_s = max(run_s, SLOWEST_VS_BEST * best_ms / 1e3)
    runs = 2 + timing.warmup
    wait = JOB_TIMEOUT_FLOOR_S + timing.max_time_s + runs * run_s + flops / REFERENCE_FLOPS_PER_S
    if timing.observe is not None and timing.observe.window:
        wait += timing.observe.window_s + run_s  # the energy window, and the run it ends in
    return min(JOB_TIMEOUT_CEILING_S, wait)


@dataclass(frozen=True, slots=True)
class Study:
    """One (family, problem) pair to tune, with its valid configurations on this device. With
    `configs`, exactly those are evaluated (in order) instead of a search: a re-measurement.

    A kernel given through tune_kernel brings its own check: `check` (data the GPU worker checks
    with, in place of fresh inputs and the float64 reference) and, where the caller passed a
    verify function or output observers, `verify`: called here, in the caller's process, on the
    outputs the worker sends back and the worker's measurement; it returns the measurement to
    record (the WRONG_RESULT one where they fail; with the observers' readings added).

    `objective`, where given, is what the strategy minimises instead of the median time: a
    function of (config, measurement or stored evaluation) called in the caller's process
    (tune_kernel's objective naming a metric, such as energy)."""

    family: Family
    problem: Problem
    space: BoundSpace
    configs: tuple[Config, ...] | None = None
    check: Any = None
    verify: Callable[[list, Measurement], Measurement] | None = None
    objective: Callable[[Config, Any], float | None] | None = None

    @property
    def label(self) -> str:
        return f"{self.family.name} {self.problem.key}"

    def told(self, config: Config, m: Any) -> float | None:
        """The value told to the strategy for an evaluation (lower is better, and above 0: the
        strategies model its logarithm): the objective's, else the median time; None for one
        that failed or whose objective has no such value."""
        if not m.status.timed:
            return None
        value = m.time_ms if self.objective is None else self.objective(config, m)
        return value if value is not None and 0 < value < math.inf else None


@dataclass(frozen=True, slots=True)
class Skipped:
    family: str
    problem: Problem
    reason: str


@dataclass(frozen=True, slots=True)
class Progress:
    """Emitted after every evaluation (and at each study's start and end, and around the
    confirmation of its best)."""

    study: str
    # "start", "eval", "end"; "confirm" before its best is measured again (tuner._confirm),
    # "unconfirmed" where that could not be done (`note` says why).
    event: str
    done: int  # evaluations stored for this study, earlier runs included
    planned: int  # the study's target (budget capped by the space)
    failures: int
    best_gflops: float | None
    campaign_done: int  # new evaluations this run
    campaign_planned: int
    elapsed_s: float
    eta_s: float | None
    last: Measurement | None = None
    config: Config | None = None
    note: str = ""


@dataclass
class StudyOutcome:
    study: Study
    evaluated: int = 0  # new this run
    stored: int = 0  # total for the study
    failures: int = 0
    # The fastest so far; once its best is confirmed, the store's top by figure (its time the
    # median of its measurements).
    best: tuple[Config, Measurement] | None = None
    stopped: str = ""  # why it ended early, if it did
    unconfirmed: str = ""  # why its best could not be measured again, if it could not
    # Later tunables its stored evaluations all predate (Family.predated): not searched yet.
    predates: tuple[str, ...] = ()


@dataclass
class CampaignOutcome:
    studies: list[StudyOutcome] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    interrupted: bool = False
    elapsed_s: float = 0.0
    gpu_busy_s: float = 0.0  # inside evaluator.evaluate (checking and timing)
    compile_wall_s: float = 0.0  # from the first compile submitted to the end
    # Studies with evaluations to go that the time limit stopped or never reached: the same
    # command resumes them.
    short: int = 0

    @property
    def evaluated(self) -> int:
        return sum(s.evaluated for s in self.studies)

    @property
    def gpu_busy_fraction(self) -> float | None:
        """How much of the wall time since compilation started the GPU worker was busy."""
        return self.gpu_busy_s / self.compile_wall_s if self.compile_wall_s > 0 else None


def plan_studies(
    pairs: Iterable[tuple[Family, Problem]], limits: DeviceLimits
) -> tuple[list[Study], list[Skipped]]:
    """Bind every (family, problem) space to the device; skip the ones that cannot run, a
    family of another problem kind (a GEMM family on a convolution) first."""
    studies, skipped = [], []
    for family, problem in pairs:
        kind = family.problem_type.kind
        if kind != problem.kind:
            reason = f"{family.name} computes {kind} problems, not {problem.kind}"
            skipped.append(Skipped(family.name, problem, reason))
            continue
        try:
            family.check(problem)
        except UnsupportedProblem as err:
            skipped.append(Skipped(family.name, problem, str(err)))
            continue
        space = family.load_space().bind(family.space_fields(problem), limits)
        if len(space) == 0:
            skipped.append(Skipped(family.name, problem, "no valid configuration on this device"))
            continue
        studies.append(Study(family, problem, space))
    return studies, skipped


def resource_problem(compiled: CompiledKernel, plan_launches, limits: DeviceLimits) -> str | None:
    """Why a compiled plan cannot launch on this device, or None. Checked before launching; what
    the launch alone decides (threads, dynamic shared memory) needs no ptxas report."""
    for launch in plan_launches:
        if launch.threads > limits.MAX_THREADS:
            return f"{launch.kernel}: {launch.threads} threads > {limits.MAX_THREADS} per block"
        res = compiled.resources.get(launch.kernel)
        smem = (res.smem_bytes if res else 0) + launch.smem_bytes
        if smem > limits.SMEM_PER_BLOCK_OPTIN:
            return f"{launch.kernel}: {smem} bytes of shared memory > {limits.SMEM_PER_BLOCK_OPTIN}"
        if res is None:
            continue
        # Registers are allocated per warp in units of 256 (8 per thread).
        regs = -(-res.registers // 8) * 8 * -(-launch.threads // 32) * 32
        if regs > limits.REGS_PER_BLOCK:
            return (
                f"{launch.kernel}: {res.registers} registers x {launch.threads} threads "
                f"> {limits.REGS_PER_BLOCK} per block"
            )
    return None


# An assumed rate of a tuned kernel, only to rank studies by their expected cost.
ORDERING_FLOPS_PER_S = 20e12


def estimated_cost_s(flops: int, evaluations: int, timing: TimingPolicy) -> float:
    """GPU seconds that `evaluations` timed evaluations of a problem of `flops` are expected to
    take: per evaluation the warm-up and checked runs, then samples until the minimum time."""
    run_s = flops / ORDERING_FLOPS_PER_S
    sampled_s = max(timing.min_time_s, timing.min_repeats * run_s)
    if timing.observe is not None and timing.observe.window:
        sampled_s += timing.observe.window_s  # the energy window after the samples
    return evaluations * (sampled_s + (timing.warmup + 2) * run_s)


def study_target(budget: int | None, study: Study, history) -> int:
    """Evaluations the study should have stored when done (earlier runs' included): the budget
    capped by the space, or, for given configs, those stored plus the given ones not yet."""
    if study.configs is not None:
        stored = {h.config for h in history if study.space.is_valid(h.config)}
        return len(stored | {c for c in study.configs if study.space.is_valid(c)})
    space_size = len(study.space)
    return space_size if budget is None else min(budget, space_size)


def valid_count(history, space: BoundSpace) -> int:
    return len({h.config for h in history if space.is_valid(h.config)})


def restrict_studies(studies: list[Study], pins: Mapping[str, Mapping[str, Iterable]], limits):
    """The studies with each pinned family's space cut to its subspace (a recording's, or a
    subspace file's), and those left with no valid config as Skipped."""
    kept, skipped = [], []
    for study in studies:
        family_pins = pins.get(study.family.name)
        if not family_pins:
            kept.append(study)
            continue
        space = restrict(study.family.load_space(), family_pins)
        bound = space.bind(study.family.space_fields(study.problem), limits)
        if len(bound):
            kept.append(dataclasses.replace(study, space=bound))
        else:
            reason = "no valid configuration in the recording subspace"
            skipped.append(Skipped(study.family.name, study.problem, reason))
    return kept, skipped


__all__ = [
    "CampaignOutcome",
    "Progress",
    "Skipped",
    "Study",
    "StudyOutcome",
    "estimated_cost_s",
    "job_timeout_s",
    "plan_studies",
    "resource_problem",
    "restrict_studies",
    "study_target",
    "valid_count",
]
