"""Re-measurement: the fastest stored configurations of each study, measured under an older
timing protocol or of the family's previous code, as studies that evaluate exactly those under
the current protocol with the current code (no search); or those of the current protocol and
code measured again, as repeats (measure_again)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pandas as pd

from autotune.families import UnknownFamily, get_family
from autotune.model.parsing import problem_from_dict
from autotune.model.precision import DEFAULT_DTYPE, DEFAULT_LAYOUT
from autotune.model.problem import ProblemError
from autotune.model.records import TIMING_PROTOCOL, Status
from autotune.model.space import Config, DeviceLimits
from autotune.store import Store
from autotune.store.queries import Kernels
from autotune.store.repeats import RankedEvaluation
from autotune.tuning.studies import Skipped, Study, plan_studies
from autotune.tuning.tuner import Tuner


def remeasure_studies(
    store: Store,
    device: str,
    limits: DeviceLimits,
    top: int,
    families: Iterable[str] = (),
    problem_keys: Iterable[str] = (),
    protocol: int = TIMING_PROTOCOL,
    dtypes: Iterable[str] = (),
    layouts: Iterable[str] = (),
    kernels: Kernels | None = None,
    again: bool = False,
) -> tuple[list[Study], list[Skipped], list[str]]:
    """Per stored study of `device` (filtered by family, problem key, dtype and layout when
    given; a problem of a kind without a dtype counts as fp32 NCHW): the `top` fastest OK
    configurations of every older protocol, and, for a family of `kernels` (family -> its
    current digest) whose code changed, of its previous code under any protocol, fastest
    first, as a Study that evaluates exactly those (made valid for the family's current space;
    the ones no longer in it are left out); `again`: those of `protocol` and the current code
    instead, for measure_again. A study's previous code is the latest other version it has
    (store.previous_kernels). Returns the studies, the ones that cannot run here (Skipped)
    and a line for each stored study this version cannot read (an unknown family or shape)."""
    families, problem_keys = set(families), set(problem_keys)
    dtypes, layouts = set(dtypes), set(layouts)
    kernels = store.kernels if kernels is None else kernels
    versions: dict[tuple[str, str], int] = {}  # (family, previous digest) -> its age, oldest 0
    if again:
        frames = [store.best(device=device, protocol=protocol, top=top, kernels=kernels)]
    else:
        frames = [
            store.best(device=device, protocol=p, top=top, kernels=kernels)
            for p in range(1, protocol)
        ]
        for name, digests in store.previous_kernels(device, kernels).items():
            for place, digest in enumerate(digests):
                versions[name, digest] = place
                frames += [
                    store.best(device, name, protocol=p, top=top, kernels={name: digest})
                    for p in range(1, protocol + 1)
                ]
    frames = [frame for frame in frames if len(frame)]
    if not frames:
        return [], [], []
    rows = pd.concat(frames, ignore_index=True).sort_values("time_ms", kind="stable")
    rows = _own_previous_code(rows, versions)
    studies, skipped, unreadable = [], [], []
    for (name, key), group in rows.groupby(["family", "problem_key"], sort=False):
        if (families and name not in families) or (problem_keys and key not in problem_keys):
            continue
        shape, kind = group["shape"].iloc[0], group["kind"].iloc[0]
        try:
            family = get_family(name)
            fields = json.loads(shape) if isinstance(shape, str) else shape
            problem = problem_from_dict(fields, kind)
        except (UnknownFamily, ProblemError, TypeError, ValueError) as err:
            unreadable.append(f"{name} {key}: {err}")
            continue
        if (dtypes and getattr(problem, "dtype", DEFAULT_DTYPE) not in dtypes) or (
            layouts and getattr(problem, "layout", DEFAULT_LAYOUT) not in layouts
        ):
            continue
        planned, cut = plan_studies([(family, problem)], limits)
        skipped += cut
        if not planned:
            continue
        study = planned[0]
        configs = dict.fromkeys(family.complete(Config.from_json(c)) for c in group["config"])
        valid = tuple(c for c in configs if study.space.is_valid(c))[:top]
        if not valid:
            skipped.append(Skipped(name, problem, "no stored config is valid in today's space"))
            continue
        studies.append(Study(study.family, problem, study.space, configs=valid))
    return studies, skipped, unreadable


def _own_previous_code(rows: pd.DataFrame, versions: dict[tuple[str, str], int]) -> pd.DataFrame:
    """The rows with each study's previous code cut to its latest version: a study measured
    under two earlier versions brings over the later one's bests only. Rows of the current code
    (an older protocol's) stay."""
    if not versions:
        return rows
    place = pd.Series(
        [versions.get(v, -1) for v in zip(rows["family"], rows["kernel_digest"], strict=True)],
        index=rows.index,
    )
    latest = place.groupby([rows["family"], rows["problem_key"]]).transform("max")
    return rows[(place < 0) | (place == latest)]


# What `remeasure --again` adds to each configuration: two measurements, so that one that had
# only its first stands on three, and their median, its figure, no longer on that first alone.
AGAIN_MEASUREMENTS = 2


@dataclass
class MeasuredAgain:
    """What measure_again did to one study: its best by figure before and after, how many
    measurements it stored, and why one configuration stopped short ('' where none did)."""

    study: Study
    before: RankedEvaluation | None
    after: RankedEvaluation | None = None
    measurements: int = 0
    failed: str = ""


def measure_again(
    tuner: Tuner,
    studies: list[Study],
    top: int,
    measurements: int,
    time_limit_s: float | None = None,
    on_study: Callable[[MeasuredAgain], None] = lambda done: None,
) -> tuple[list[MeasuredAgain], bool]:
    """Measure each study's configurations (remeasure_studies(again=True): the valid ones of
    its `top` of the current protocol and code) `measurements` more times each, through the
    tuner's check and timer, each stored as a repeat of its evaluation, so that their figures,
    and the study's best, follow. A measurement that fails is not a time: that configuration
    stops there. No evaluation is added and no budget spent. Returns what was done and whether
    it was interrupted (Ctrl-C: the measurements stored so far stay)."""
    deadline = time.monotonic() + time_limit_s if time_limit_s else None
    done: list[MeasuredAgain] = []
    with tuner.hold():
        try:
            for study in studies:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                done.append(_again(tuner, study, top, measurements))
                on_study(done[-1])
        except KeyboardInterrupt:
            return done, True
    return done, False


def _again(tuner: Tuner, study: Study, top: int, measurements: int) -> MeasuredAgain:
    """measure_again's work on one study."""
    family, wanted = study.family, set(study.configs or ())
    digest = tuner.runner.kernel_digest(family)

    def ranked(count: int) -> list[RankedEvaluation]:
        protocol = tuner.runner.protocol
        return tuner.store.study_top(
            tuner.device_id, family.name, study.problem, protocol, digest, count
        )

    fastest = ranked(top)
    result = MeasuredAgain(study, fastest[0] if fastest else None)
    for stored in fastest:
        config = family.complete(stored.config)
        if config not in wanted:
            continue
        prepared = tuner.runner.prepare(study, config)
        for _ in range(measurements):
            m = tuner.evaluate(study, config, prepared)
            if m.status is not Status.OK:
                said = (m.error or "").strip().splitlines()
                result.failed = m.status.value + (f": {said[0]}" if said else "")
                break
            tuner.store.add_repeats(stored.evaluation_id, tuner.run_id, [m])
            result.measurements += 1
    after = ranked(1)
    result.after = after[0] if after else None
    return result


def again_table(measured: list[MeasuredAgain]) -> pd.DataFrame:
    """measure_again's outcome as a table: family, shape, before_ms and after_ms (the study's
    best figure), moved (yes where another configuration is the best now), measurements
    (stored) and stopped (why a configuration stopped short)."""
    rows = [
        {
            "family": done.study.family.name,
            "shape": done.study.problem.key,
            "before_ms": None if done.before is None else float(f"{done.before.time_ms:.4g}"),
            "after_ms": None if done.after is None else float(f"{done.after.time_ms:.4g}"),
            "moved": "yes"
            if done.before and done.after and done.after.config != done.before.config
            else "",
            "measurements": done.measurements,
            "stopped": done.failed,
        }
        for done in measured
    ]
    return pd.DataFrame(rows)


def protocol_comparison(
    store: Store,
    device: str,
    studies: list[Study],
    old: int,
    new: int = TIMING_PROTOCOL,
    old_kernels: Kernels | None = None,
    new_kernels: Kernels | None = None,
) -> pd.DataFrame:
    """The best stored time of each study under two protocols, or of two versions of the code
    (the store's current one unless given), side by side: family, shape, old_ms, new_ms,
    old_gflops, new_gflops, ratio (new GFlop/s over old)."""
    wanted = {(s.family.name, s.problem.key) for s in studies}
    frames = []
    for protocol, kernels, tag in ((old, old_kernels, "old"), (new, new_kernels, "new")):
        best = store.best(device=device, protocol=protocol, kernels=kernels)
        if not len(best):  # nothing stored under that protocol of that code
            return pd.DataFrame()
        keys = zip(best["family"], best["problem_key"], strict=True)
        best = best[[key in wanted for key in keys]]
        frames.append(
            best[["family", "problem_key", "time_ms", "gflops"]].rename(
                columns={"time_ms": f"{tag}_ms", "gflops": f"{tag}_gflops"}
            )
        )
    both = frames[0].merge(frames[1], on=["family", "problem_key"], how="inner")
    both["ratio"] = (both["new_gflops"] / both["old_gflops"]).round(3)
    for column in ("old_ms", "new_ms"):
        both[column] = [float(f"{t:.4g}") for t in both[column]]
    for column in ("old_gflops", "new_gflops"):
        both[column] = both[column].round(1)
    return both.rename(columns={"problem_key": "shape"}).reset_index(drop=True)


__all__ = [
    "AGAIN_MEASUREMENTS",
    "MeasuredAgain",
    "again_table",
    "measure_again",
    "protocol_comparison",
    "remeasure_studies",
]
