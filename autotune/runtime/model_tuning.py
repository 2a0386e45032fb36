"""Tuning a whole PyTorch model: its convolutions (models.collect_convolutions), each as
optimize() will call it, become ordinary studies of every family that computes the dtype."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from autotune.families import FAMILIES, Family, UnsupportedProblem, get_family
from autotune.model.precision import check_dtype
from autotune.model.problem import ConvProblem
from autotune.runtime.calls import CallError
from autotune.runtime.choice import callable_family
from autotune.runtime.models import ModelConv, collect_convolutions, model_epilogues

# Evaluations per (family, shape) when a whole model is tuned: a campaign's, not a miss's.
MODEL_BUDGET = 60
PRE_PADDED = {"padding": 0, "tail": 0}  # the input a family that reads no extents of its own reads


def model_studies(
    problems: Iterable[ConvProblem], dtype: str, families: Iterable[Family] | None = None
) -> list[tuple[Family, ConvProblem]]:
    """(family, problem) for every distinct size and every family that computes `dtype`, in
    each layout it reads: with the size's epilogue where the family fuses it, else plain (its
    epilogue is then a pass after the call); with the size's padding and tail where the family
    reads its input in place, else pre-padded (the runtime then pads a copy)."""
    check_dtype(dtype)
    chosen = list(families) if families is not None else list(FAMILIES.values())
    pairs = []
    for sizes in dict.fromkeys(problems):
        for family in chosen:
            if dtype not in family.dtypes:
                continue
            own = family.reads_padding
            extents = {"padding": sizes.padding, "tail": sizes.tail} if own else PRE_PADDED
            for layout in family.layouts:
                problem = replace(sizes, dtype=dtype, layout=layout, **extents)
                plain = replace(problem, epilogue="")
                if callable_family(family, plain) is None:  # the runtime calls plain plans
                    pairs.append((family, problem if _fuses(family, problem) else plain))
    return list(dict.fromkeys(pairs))


def _fuses(family: Family, problem: ConvProblem) -> bool:
    """Whether `family` computes `problem` with its epilogue in its store (and so can tune it
    with it); the runtime serves such a call with the plain problem's plan and the epilogue's
    buffers (a residual, a bias) passed beside."""
    if not problem.epilogue:
        return False
    try:
        family.check(problem)
    except UnsupportedProblem:
        return False
    return True


@dataclass
class ModelTuning:
    """What tune_model did: the model's convolutions and the tuning campaign's outcome."""

    convolutions: list[ModelConv]
    studies: int
    evaluated: int
    skipped: list
    short: int = 0  # studies the time limit left short of the budget (CampaignOutcome.short)


def tune_model(
    model: torch.nn.Module,
    example_inputs,
    dtype: str = "fp32",
    *,
    database: str | None = None,
    budget: int = MODEL_BUDGET,
    families: Sequence[str] | None = None,
    gpu: int = 0,
    time_limit_s: float | None = None,
    cache_dir: Path | None = None,
    evaluator=None,
    say: Callable[[str], None] = lambda line: None,
    on_progress: Callable | None = None,
) -> ModelTuning:
    """Tune every distinct convolution of `model` (its torch.nn.Conv2d modules as
    `example_inputs` call them) in `dtype` ("fp32" with TF32 off, "tf32", "bf16", "fp16"), with
    every family that computes it, `budget` evaluations per (family, shape), stored in
    `database` (the user's by default): ordinary studies through the session setup, so running
    it again resumes. `on_progress` gets the tuner's Progress after every evaluation; `evaluator`
    replaces the GPU worker (tests)."""
    from autotune.gpu.compiler import DEFAULT_CACHE
    from autotune.runtime.dispatch import runtime
    from autotune.store import default_storage
    from autotune.tuning.session import open_gpu_session
    from autotune.tuning.studies import plan_studies

    convs = collect_convolutions(model, example_inputs)
    # Each convolution as optimize() will call it: a configuration fast without its epilogue
    # can be slow with it (ResNet-50's conv3 at 56x56 in tf32 on the H200: 65 us tuned plain,
    # 392 us called with its residual add and ReLU).
    epilogues = model_epilogues(model, runtime(database))
    problems = [
        replace(c.problem, epilogue=epilogues.get(c.name, ""))
        for c in convs
        if c.problem is not None
    ]
    chosen = [get_family(n) for n in families] if families else None
    pairs = model_studies(problems, dtype, chosen)
    if not pairs:
        raise CallError(f"no family computes this model's convolutions in {dtype}")
    session = open_gpu_session(
        database or default_storage(),
        gpu=gpu,
        cache_dir=cache_dir or DEFAULT_CACHE,
        say=say,
        evaluator=evaluator,
    )
    try:
        session.measure_ceilings(say)
        studies, skipped = plan_studies(pairs, session.runner.limits)
        # A problem over the call's own input that a family cannot read in place on this
        # device (tc_wgmma's im2col path wants whole 16-byte channel chunks: not VGG-16's
        # stride-1 first layer, C = 3) is tuned pre-padded instead, as the runtime will serve it
        # from a padded copy.
        again = [
            (get_family(s.family), replace(s.problem, **PRE_PADDED))
            for s in skipped
            if not s.problem.pre_padded
        ]
        if again:
            more, still = plan_studies(again, session.runner.limits)
            studies += more
            skipped = [s for s in skipped if s.problem.pre_padded] + still
        say(f"autotune: {len(set(problems))} shapes, {len(studies)} studies in {dtype}")
        command = f"autotune.tune_model {type(model).__name__} {dtype}"
        tuner = session.tuner(command, on_progress=on_progress)
        outcome = tuner.run(studies, budget, time_limit_s)
    finally:
        session.close()
    evaluated = sum(s.evaluated for s in outcome.studies)
    return ModelTuning(convs, len(studies), evaluated, skipped, outcome.short)


__all__ = ["MODEL_BUDGET", "ModelTuning", "model_studies", "tune_model"]
