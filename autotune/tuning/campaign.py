"""Opening a campaign for `autotune run` and for each worker of a scheduled campaign (`run --gpus`,
`run --ray`): the request as plain values, the replay or the GPU, and the studies planned on it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autotune.families import get_family, with_directories
from autotune.gpu.compiler import DEFAULT_CACHE
from autotune.gpu.timing import QUICK_TIMING, TimingPolicy
from autotune.model.campaigns import DEFAULT_BUDGET, FULL, named_campaign
from autotune.model.observe import Observe
from autotune.model.precision import family_precisions
from autotune.model.shapes import ShapeSelection, in_precisions, named_shapes
from autotune.strategies import DEFAULT_STRATEGY

Say = Callable[[str], None]  # where a campaign's messages go (stderr, as one line each)


def say_on_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class NothingToTune(ValueError):
    """No (family, shape) pair can run; the message says why."""


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What `autotune run` was asked, as plain values."""

    families: tuple[str, ...] = ()
    # A named campaign (model/campaigns.py) names the families and shapes itself; None or "full":
    # the families asked (default: every one) on the shapes asked (default: each family's own).
    campaign: str | None = None
    # Kernel directories whose families join the built-in ones.
    kernel_dirs: tuple[Path, ...] = ()
    # The shapes asked (none: each family's own set), each 2D convolution in the dtypes and
    # layouts asked (none: each family's own, see family_precisions).
    selection: ShapeSelection = ShapeSelection()
    strategy: str = DEFAULT_STRATEGY
    budget: int | None = DEFAULT_BUDGET  # None: every valid configuration
    time_limit_s: float | None = None
    seed: int = 0
    gpu: int = 0
    cache_dir: Path | None = DEFAULT_CACHE
    baselines: bool = True
    jobs: int | None = None
    quick_timing: bool = False
    observe: Observe | None = None  # what the GPU worker records of the device (NVML)
    replay: Path | None = None
    subspace: Path | None = None
    storage: str | None = None  # None: a replay's results in memory only
    share: bool = False
    # Stored with the run, and shown by `status` to anyone who can read the database: the
    # caller hides its passwords.
    command: str = ""


@dataclass
class Campaign:
    """A run's open session (store and runner) and its planned studies (`autotune run`, and each
    worker of a scheduled campaign)."""

    session: Any  # tuning.session.Session
    storage: str
    baselines: bool
    studies: list
    skipped: list
    observe: Observe | None = None  # the libraries' baselines are observed as our kernels are

    @property
    def info(self):
        return self.session.device

    @property
    def store(self):
        return self.session.store

    @property
    def cache_error(self) -> str | None:
        """Why the cubin cache could not be written, if it could not (a replay has none)."""
        return self.session.runner.cache_error

    def tuner(self, request: RunRequest, on_progress=None, **options):
        return self.session.tuner(
            request.command,
            strategy=request.strategy,
            seed=request.seed,
            timing=replace(
                QUICK_TIMING if request.quick_timing else TimingPolicy(), observe=request.observe
            ),
            on_progress=on_progress,
            jobs=request.jobs,
            **options,
        )

    def measure_libraries(self, problems: list, say: Say = say_on_stderr) -> None:
        """The device's ceilings and these problems' library baselines, where not stored."""
        if self.baselines:
            from autotune.tuning.baselines import ceilings_and_baselines

            runner = self.session.runner
            ceilings_and_baselines(
                runner.evaluator,
                runner.compiler,
                self.store,
                self.session.device_id,
                problems,
                say,
                self.observe,
            )

    def stop(self) -> None:
        """Stop the runner (the GPU worker); the store stays open for the summary."""
        self.session.runner.close()


@dataclass(frozen=True, slots=True)
class Pairing:
    """The (family, problem) pairs a request names, and one line per family and dtype or layout
    left out because the family does not compute it."""

    pairs: list
    refused: list[str]


def pair_request(request: RunRequest) -> Pairing:
    """The (family, problem) pairs a request names: a named campaign's, else its families
    (default: every one) on its shapes (default: each family's own set), each 2D convolution
    in the dtypes and layouts asked (default: the family's own) that the family computes; the
    others are refused in one line per family and value, not per shape."""
    registry = with_directories(request.kernel_dirs)
    if request.campaign not in (None, FULL):
        spec = named_campaign(request.campaign)
        return Pairing([(get_family(name, registry), p) for name, p in spec.pairs], [])
    chosen = [get_family(name, registry) for name in request.families]
    chosen = chosen or list(registry.values())
    asked = request.selection
    # Shapes are read (and a bad one refused) even where no family is left to tune them.
    asked.problems((), (), strict=False)
    pairs, refused = [], []
    for family in chosen:
        dtypes, layouts = family_precisions(family, asked.dtypes, asked.layouts)
        own_dtypes, own_layouts = tuple(family.dtypes), tuple(family.layouts)
        for dtype in dtypes:
            if dtype not in own_dtypes:
                refused.append(f"{family.name} in {dtype}: it computes {'/'.join(own_dtypes)}")
        for layout in layouts:
            if layout not in own_layouts:
                refused.append(f"{family.name} in {layout}: it reads {'/'.join(own_layouts)}")
        dtypes = tuple(d for d in dtypes if d in own_dtypes)
        layouts = tuple(x for x in layouts if x in own_layouts)
        if not dtypes or not layouts:
            continue
        if asked.named:
            problems = asked.problems(dtypes, layouts, strict=False)
        else:
            problems = in_precisions(
                named_shapes(family.default_shape_set), dtypes, layouts, strict=False
            )
        pairs += [(family, problem) for problem in problems]
    return Pairing(pairs, refused)


def campaign_pairs(request: RunRequest) -> list:
    """The (family, problem) pairs a request names (pair_request, without the refused lines)."""
    return pair_request(request).pairs


def check_runnable(request: RunRequest) -> None:
    """NothingToTune where no pair could run on any device (each family's problem kind and its
    own checks): for a scheduler's driver, which has no GPU to plan on (`run --gpus`, `--ray`)."""
    from autotune.families import UnsupportedProblem

    pairing = pair_request(request)
    reasons = list(pairing.refused)
    for family, problem in pairing.pairs:
        kind = family.problem_type.kind
        if kind != problem.kind:
            reasons.append(f"{family.name} {problem.key}: {family.name} computes {kind} problems")
            continue
        try:
            family.check(problem)
        except UnsupportedProblem as err:
            reasons.append(f"{family.name} {problem.key}: {err}")
            continue
        return
    shown = list(dict.fromkeys(reasons))
    more = f"; {len(shown) - 3} more" if len(shown) > 3 else ""
    raise NothingToTune(
        "nothing to tune: no (family, shape) pair can run ("
        + ("; ".join(shown[:3]) or "no shapes")
        + more
        + ")"
    )


def open_campaign(request: RunRequest, say: Say = say_on_stderr, gpu: int | None = None):
    """Open the replay or the GPU (request.gpu unless `gpu` is given) and plan the studies (cut
    to their pins, dropping what cannot fit); the evaluator is closed again on an error."""
    from autotune.store import hide_passwords
    from autotune.tuning.studies import Skipped, plan_studies

    def tuned_pairs():
        return pair_request(request)

    # A bad family or shape fails before a GPU starts; a replay's recording may name families
    # of its own (spaces recorded elsewhere), so there they are resolved once it is open.
    pairing = None if request.replay else tuned_pairs()
    if pairing is not None and not pairing.pairs and pairing.refused:
        # Every family refused every dtype or layout asked: no GPU needs to start to say so.
        raise NothingToTune(
            "nothing to tune: no (family, shape) pair can run ("
            + _reasons([], pairing.refused)
            + ")"
        )
    from autotune.replay.subspaces import load_pins
    from autotune.tuning.session import open_gpu_session, open_replay_session
    from autotune.tuning.studies import Study

    given_pins = load_pins(request.subspace) if request.subspace else None  # read, or refused
    if request.replay:
        session = open_replay_session(request.replay, request.storage, share=request.share)
        storage, baselines = request.storage or "memory", False
    else:
        storage, baselines = request.storage, request.baselines
        session = open_gpu_session(
            storage,
            gpu=request.gpu if gpu is None else gpu,
            cache_dir=request.cache_dir,
            share=request.share,
            say=say,
            compile_processes=True,
        )
    runner = session.runner
    try:
        info = runner.device
        # Spaces recorded elsewhere (Kernel Tuner's caches) bring their own studies.
        recorded = runner.recorded_pairs(request.families) if request.replay else None
        refused: list[str] = []
        if recorded is not None:
            studies, skipped = [Study(*pair) for pair in recorded], []
        else:
            pairing = tuned_pairs() if pairing is None else pairing
            refused = pairing.refused
            studies, skipped = plan_studies(pairing.pairs, runner.limits)
            if request.replay:  # a study the recording does not hold cannot be replayed
                held = [s for s in studies if runner.study(s.family.name, s.problem)]
                skipped += [
                    Skipped(s.family.name, s.problem, "not in the recording")
                    for s in studies
                    if s not in held
                ]
                studies = held
        # A replay searches the subspaces its recording was made over unless told otherwise.
        pins = runner.pins
        if given_pins is not None or pins:
            from autotune.tuning.studies import restrict_studies

            pins = given_pins if given_pins is not None else pins
            studies, cut = restrict_studies(studies, pins, runner.limits)
            skipped += cut
        studies, too_large = _fitting(studies, info.memory_bytes)
        skipped += too_large
        for line in refused:
            say(f"autotune: skipping {line}")
        for s in skipped:
            say(f"autotune: skipping {s.family} {s.problem.key}: {s.reason}")
        if not studies:
            raise NothingToTune(
                "nothing to tune: no (family, shape) pair can run ("
                + _reasons(skipped, refused)
                + ")"
            )
        budget = request.budget
        say(
            f"autotune: {info.name} (sm_{info.compute_capability.replace('.', '')}, "
            f"{info.sm_count} SMs, CUDA driver {info.driver_version}, "
            f"NVRTC {runner.compiler_version}); "
            + (f"{len(studies)} studies" if len(studies) != 1 else "1 study")
            + (f" (campaign {request.campaign})" if request.campaign else "")
            + f", strategy {request.strategy}, "
            f"budget {'exhaustive' if budget is None else budget} per study; "
            f"storage {hide_passwords(storage)}"
        )
    except BaseException:
        session.close()
        raise
    return Campaign(session, storage, baselines, studies, skipped, request.observe)


def _fitting(studies: list, memory_bytes: int) -> tuple[list, list]:
    """The studies whose problem's own arrays fit in the device's memory, and the others as
    skipped (they would only fail, one candidate after another, out of memory)."""
    from autotune.tuning.studies import Skipped

    if not memory_bytes:  # not known (a replay, an evaluator that does not say)
        return studies, []
    kept, skipped = [], []
    for study in studies:
        need = study.problem.min_bytes
        if need > memory_bytes:
            reason = (
                f"its inputs and outputs alone take {need / 1e9:,.1f} GB, the device has "
                f"{memory_bytes / 1e9:,.1f} GB"
            )
            skipped.append(Skipped(study.family.name, study.problem, reason))
        else:
            kept.append(study)
    return kept, skipped


def _reasons(skipped: list, refused: tuple[str, ...] | list[str] = (), shown: int = 3) -> str:
    """Why nothing can run, in one line: the distinct reasons, the first few of them."""
    reasons = list(refused)
    reasons += dict.fromkeys(f"{s.family} {s.problem.key}: {s.reason}" for s in skipped)
    reasons = list(dict.fromkeys(reasons))
    if not reasons:
        return "no shapes"
    more = f"; {len(reasons) - shown} more above" if len(reasons) > shown else ""
    return "; ".join(reasons[:shown]) + more


__all__ = [
    "Campaign",
    "NothingToTune",
    "Pairing",
    "RunRequest",
    "Say",
    "campaign_pairs",
    "check_runnable",
    "family_precisions",
    "open_campaign",
    "pair_request",
    "say_on_stderr",
]
