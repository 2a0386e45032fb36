"""Kernel Tuner's own strategies on the same recorded spaces as ours, in its simulation mode
(named kt_<strategy> in `autotune bench search`), and transfer across GPUs for the recorded
spaces of one kernel measured on several devices."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import random
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

KT_PREFIX = "kt_"
KT_VERSION = "1.5.0"
# The strategies the issue asks for (Schoonhoven et al. 2022 compared these), by Kernel Tuner's
# names; any other name of its strategy map can be asked for as kt_<name>.
KT_DEFAULT = (
    "random_sample",
    "dual_annealing",
    "genetic_algorithm",
    "simulated_annealing",
    "basinhopping",
    "greedy_ils",
    "bayes_opt",
)
KT_SLOW = {"kt_bayes_opt": 5}  # seconds per run on the 18k-config GEMM spaces, like our gp
KERNEL = "recorded"  # the kernel name written to and asked of the cache file (both ours)
TRANSFER_GPU = "transfer_gpu"  # the default strategy seeded from the other GPUs' best configs
# The default as `autotune run` runs it when the store holds the same space on other GPUs
# (leave-one-GPU-out): started at, and modelled on, their results.
DEFAULT_WARM = "default_warm"

_FILES: dict[int, str] = {}  # case index -> its Kernel Tuner cache file, written before forking


def kt_available() -> str | None:
    """Why Kernel Tuner's strategies cannot run here, or None."""
    if importlib.util.find_spec("kernel_tuner") is None:
        return (
            f"Kernel Tuner is not installed: pip install -e '.[bench]' (kernel_tuner=={KT_VERSION})"
        )
    return None


def kt_unknown(name: str) -> str | None:
    """Why kt_<name> is no Kernel Tuner strategy, or None."""
    from kernel_tuner.interface import strategy_map

    inner = name.removeprefix(KT_PREFIX)
    if inner not in strategy_map:
        return f"{name}: Kernel Tuner has no strategy {inner!r}"
    return None


def write_caches(cases: Sequence) -> tempfile.TemporaryDirectory:
    """Each case as a Kernel Tuner cache file (JSON, as its simulation mode reads them), in a
    directory that lives as long as the returned object."""
    from autotune.kt.cache import kt_cache

    folder = tempfile.TemporaryDirectory(prefix="autotune-kt-")
    _FILES.clear()
    for i, case in enumerate(cases):
        path = Path(folder.name) / f"case{i}.json"
        # Only the space's configs: a recording of ours may hold some outside its subspace.
        study = dataclasses.replace(
            case.study, outcomes={c: case.study.outcomes[c] for c in case.space.configs}
        )
        path.write_text(json.dumps(kt_cache(study, tunables_of_case(case), KERNEL)))
        _FILES[i] = str(path)
    return folder


def tunables_of_case(case) -> list[tuple[str, list]]:
    return [(p.name, list(p.values)) for p in case.space.space.parameters]


def run_kt(name: str, case, case_index: int, seed: int, budget: int):
    """One Kernel Tuner strategy on one space: (trajectory, seconds, evaluations), the trajectory
    being the best fraction of the optimum after each distinct configuration it evaluated (a
    failure counts, as it does against Kernel Tuner's max_fevals)."""
    from constraint import FunctionConstraint
    from kernel_tuner import tune_kernel

    from autotune.kt.cache import kt_problem_size
    from autotune.model.space import Config

    tunables = tunables_of_case(case)
    keys = [k for k, _ in tunables]
    # The search space is every configuration in the file, failures included, as ours is
    # (Kernel Tuner's tune_cache() would drop the failures from its space).
    recorded = {tuple(c[k] for k in keys) for c in case.space.configs}

    def in_file(*values) -> bool:
        return values in recorded

    random.seed(seed)  # Kernel Tuner's strategies draw from the global generators
    np.random.seed(seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(
            KERNEL,
            "",
            tuple(kt_problem_size(case.problem)),
            [],
            dict(tunables),
            restrictions=[FunctionConstraint(in_file)],
            strategy=name.removeprefix(KT_PREFIX),
            strategy_options={"max_fevals": budget},
            cache=_FILES[case_index],
            simulation_mode=True,
            quiet=True,
        )
    spent = time.perf_counter() - start
    best, seen, trajectory = math.inf, set(), []
    for r in results:
        config = Config.of({k: r[k] for k in keys})
        if config in seen:
            continue  # served again from its cache: not another evaluation
        seen.add(config)
        t = case.ok.get(config)
        if t is not None:
            best = min(best, t)
        trajectory.append(case.optimum_ms / best if math.isfinite(best) else 0.0)
        if len(trajectory) == budget:
            break
    return trajectory, spent, len(trajectory)


def other_device_cases(case, cases: Sequence) -> list:
    """The cases of the same family and parameters on every other device, in name order."""
    names = set(case.space.space.names)
    return [
        other
        for other in sorted(cases, key=lambda c: c.device)
        if other.device != case.device
        and other.family == case.family
        and set(other.space.space.names) == names
    ]


def other_devices(case, cases: Sequence) -> list[list]:
    """The best configs (fastest first) of the same family and parameters on every other
    device, in name order (leave-one-GPU-out transfer)."""
    from autotune.strategies.transfer import PER_SHAPE

    out = []
    for other in other_device_cases(case, cases):
        ok = sorted((t, c.to_json(), c) for c, t in other.ok.items() if t is not None)
        out.append([c for _, _, c in ok[:PER_SHAPE]])
    return out


def versus_kt(frame, default: str) -> list[str]:
    """Markdown lines: per budget, the default strategy cold and warm (seeded from the other
    GPUs), transfer across GPUs and the best of Kernel Tuner's strategies, averaged over the
    spaces."""
    every = frame[frame["space"] == "ALL"]
    kt = every[every["strategy"].str.startswith(KT_PREFIX)]
    if not len(kt):
        return []
    lines = [
        "",
        f"## Our default (`{default}`) against the best Kernel Tuner strategy per budget",
        "",
        "| budget | default | default_warm | transfer_gpu | best Kernel Tuner strategy "
        "| its fraction | default - it |",
        "|---:|---:|---:|---:|---|---:|---:|",
    ]
    ours = every[every["strategy"] == "default"].set_index("budget")["fraction_of_optimum"]
    gpu = every[every["strategy"] == TRANSFER_GPU].set_index("budget")["fraction_of_optimum"]
    warm = every[every["strategy"] == DEFAULT_WARM].set_index("budget")["fraction_of_optimum"]
    for budget, g in kt.groupby("budget"):
        top = g.loc[g["fraction_of_optimum"].idxmax()]
        mine = ours.get(budget, math.nan)
        lines.append(
            f"| {budget} | {mine:.3f} | {warm.get(budget, math.nan):.3f} | "
            f"{gpu.get(budget, math.nan):.3f} | {top['strategy']} | "
            f"{top['fraction_of_optimum']:.3f} | {mine - top['fraction_of_optimum']:+.3f} |"
        )
    return lines


__all__ = [
    "DEFAULT_WARM",
    "KT_DEFAULT",
    "KT_PREFIX",
    "KT_SLOW",
    "TRANSFER_GPU",
    "kt_available",
    "kt_unknown",
    "other_device_cases",
    "other_devices",
    "run_kt",
    "versus_kt",
    "write_caches",
]
