"""Transfer for the tuner: seeds for a study from the stored best configs of nearby shapes."""

from __future__ import annotations

import json
from pathlib import Path

from autotune.model.parsing import problem_from_dict
from autotune.model.problem import ProblemError
from autotune.model.records import TIMING_PROTOCOL, Status
from autotune.model.space import Config
from autotune.store import Store
from autotune.store.campaigns import shipped_bests
from autotune.strategies.base import Strategy
from autotune.strategies.transfer import (
    PER_SHAPE,
    Transfer,
    made_valid,
    transfer_seeds,
    warm_across_devices,
)

# Brute force walks the space in its own order on purpose (exhaustive recordings); seeding it
# would only reorder that walk.
NOT_SEEDED = {"brute_force"}


def warm_start(
    strategy: Strategy,
    store: Store,
    device: str,
    study,
    protocol: int = TIMING_PROTOCOL,
    kernel_digest: str | None = None,
    shipped_dir: Path | None = None,
) -> Strategy:
    """The strategy wrapped in Transfer when the store holds other shapes of the study's family
    on this device measured under `protocol` (seeded with their best configs, made valid here,
    then the family's starting configurations), or else this shape on other devices (their best
    configs, stored or shipped: `shipped_dir`, the package's by default), or else where the
    family has starting configurations (those); else unchanged. With a kernel_digest, only
    measurements of that code seed it (the store's current one else)."""
    if strategy.name in NOT_SEEDED:
        return strategy
    kernels = {study.family.name: kernel_digest} if kernel_digest is not None else None
    history = store.history(
        device=device, family=study.family.name, protocol=protocol, kernels=kernels
    )
    starting = starting_seeds(study)
    if not len(history):
        others = other_devices_times(store, device, study, kernels, protocol, shipped_dir)
        warm = warm_across_devices(strategy, study.space, others)
        if warm is strategy and starting:  # measured nowhere: the family's own start
            return Transfer(strategy, starting)
        return warm
    ok = history[(history["status"] == Status.OK.value) & (history["kind"] == study.problem.kind)]
    ok = ok[ok["problem_key"] != study.problem.key].sort_values(["time_ms", "id"])
    neighbours = []
    for _, rows in ok.groupby("problem_key", sort=False):
        shape = rows["shape"].iloc[0]
        try:
            problem = problem_from_dict(
                json.loads(shape) if isinstance(shape, str) else shape, study.problem.kind
            )
        except (ProblemError, TypeError, ValueError):
            continue  # a row this version cannot read is no neighbour
        configs = list(dict.fromkeys(rows["config"].head(4 * PER_SHAPE)))[:PER_SHAPE]
        configs = [study.family.complete(Config.from_json(c)) for c in configs]
        neighbours.append((problem, configs))
    # Only neighbours of the study's own dtype and layout seed it: shape_distance is infinite
    # across them (a bf16 tile made valid for fp32 would be a guess, however valid).
    seeds = transfer_seeds(study.problem, study.space, neighbours)
    seeds += [c for c in starting if c not in seeds]
    return Transfer(strategy, seeds) if seeds else strategy


def starting_seeds(study) -> list[Config]:
    """The family's starting configurations (Family.starting_configs), each made valid for the
    study's shape as the nearest valid config, without repeats (none for a recorded space's
    stand-in family, which has no such attribute)."""
    starting = getattr(study.family, "starting_configs", ())
    if not starting:
        return []
    return made_valid(study.space, (study.family.complete(Config.of(v)) for v in starting))


def other_devices_times(
    store: Store,
    device: str,
    study,
    kernels: dict[str, str] | None = None,
    protocol: int = TIMING_PROTOCOL,
    shipped_dir: Path | None = None,
) -> list[dict[Config, float | None]]:
    """Every stored result of the same family and shape on each other device (this one left
    out), in device name order: config -> time, None for a failure (a config measured more than
    once keeps its best time). The tile that suits one GPU is often near the best on another:
    on Kernel Tuner's published spaces, the default seeded from the other GPUs' results is the
    `default_warm` row of results/bench/search_published.md. A device the store holds nothing
    of may still give its shipped best (package data, under `protocol` and the current code),
    this device's own included: a first run starts where the project's own GPUs ended, and
    measures that start again like any other configuration."""
    by_device: dict[str, dict[Config, float | None]] = {}
    history = store.history(family=study.family.name, kernels=kernels)
    if len(history):
        rows = history[
            (history["kind"] == study.problem.kind)
            & (history["problem_key"] == study.problem.key)
            & (history["device"] != device)
        ]
        timed = {s.value for s in Status if s.timed}
        for name, group in rows.groupby("device", sort=False):
            times: dict[Config, float | None] = {}
            for config, status, time_ms in zip(
                group["config"], group["status"], group["time_ms"], strict=True
            ):
                c = study.family.complete(Config.from_json(config))
                t = float(time_ms) if status in timed and time_ms == time_ms else None
                if t is not None or c not in times:
                    times[c] = t if times.get(c) is None else min(times[c], t)
            by_device[str(name)] = times
    digest = (kernels or {}).get(study.family.name)
    for name, rows in shipped_bests(protocol, shipped_dir).items():
        if name in by_device:
            continue  # the store speaks for that device
        best = [
            row
            for row in rows
            if row.get("family") == study.family.name
            and row.get("kind", study.problem.kind) == study.problem.kind
            and row.get("problem_key") == study.problem.key
            and (digest is None or row.get("kernel_digest") == digest)
        ]
        if best:
            config = study.family.complete(Config.from_json(best[0]["config"]))
            by_device[name] = {config: float(best[0]["time_ms"])}
    return [by_device[name] for name in sorted(by_device)]
