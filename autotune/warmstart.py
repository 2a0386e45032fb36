"""Transfer for the tuner: seeds for a study from the stored best configs of nearby shapes."""

from __future__ import annotations

import json

from autotune.problem import ProblemError, problem_from_dict
from autotune.records import TIMING_PROTOCOL, Status
from autotune.space import Config
from autotune.store import Store
from autotune.strategies.base import Strategy
from autotune.strategies.transfer import PER_SHAPE, Transfer, transfer_seeds

# Brute force walks the space in its own order on purpose (exhaustive recordings); seeding it
# would only reorder that walk.
NOT_SEEDED = {"brute_force"}


def warm_start(
    strategy: Strategy, store: Store, device: str, study, protocol: int = TIMING_PROTOCOL
) -> Strategy:
    """The strategy wrapped in Transfer when the store holds other shapes of the study's family
    on this device measured under `protocol` (seeded with their best configs, made valid here);
    else unchanged."""
    if strategy.name in NOT_SEEDED:
        return strategy
    history = store.history(device=device, family=study.family.name, protocol=protocol)
    if not len(history):
        return strategy
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
    seeds = transfer_seeds(study.problem, study.space, neighbours)
    return Transfer(strategy, seeds) if seeds else strategy
