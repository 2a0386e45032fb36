"""Re-measurement: the fastest stored configurations of each study, measured under an older
timing protocol or of the family's previous code, as studies that evaluate exactly those under
the current protocol with the current code (no search)."""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd

from autotune.families import UnknownFamily, get_family
from autotune.model.parsing import problem_from_dict
from autotune.model.precision import DEFAULT_DTYPE, DEFAULT_LAYOUT
from autotune.model.problem import ProblemError
from autotune.model.records import TIMING_PROTOCOL
from autotune.model.space import Config, DeviceLimits
from autotune.store import Store
from autotune.store.queries import Kernels
from autotune.tuning.studies import Skipped, Study, plan_studies


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
) -> tuple[list[Study], list[Skipped], list[str]]:
    """Per stored study of `device` (filtered by family, problem key, dtype and layout when
    given; a problem of a kind without a dtype counts as fp32 NCHW): the `top` fastest OK
    configurations of every older protocol, and, for a family of `kernels` (family -> its
    current digest) whose code changed, of its previous code under any protocol, fastest
    first, as a Study that evaluates exactly those (made valid for the family's current space;
    the ones no longer in it are left out). Returns the studies, the ones that cannot run here
    (Skipped) and a line for each stored study this version cannot read (an unknown family or
    shape)."""
    families, problem_keys = set(families), set(problem_keys)
    dtypes, layouts = set(dtypes), set(layouts)
    kernels = store.kernels if kernels is None else kernels
    older = [
        store.best(device=device, protocol=p, top=top, kernels=kernels) for p in range(1, protocol)
    ]
    for name, digest in store.previous_kernels(device, kernels).items():
        older += [
            store.best(device, name, protocol=p, top=top, kernels={name: digest})
            for p in range(1, protocol + 1)
        ]
    older = [frame for frame in older if len(frame)]
    if not older:
        return [], [], []
    rows = pd.concat(older, ignore_index=True).sort_values("time_ms", kind="stable")
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


__all__ = ["protocol_comparison", "remeasure_studies"]
