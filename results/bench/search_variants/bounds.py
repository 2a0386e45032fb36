"""Issue 25, 2026-11-27: what bounds the default's mean fraction of the optimum at 50 evaluations.

A research script beside variants.py (same spaces, seeds and scoring). Per space: how many
configurations lie within 0.95 and 0.9 of the optimum, the default's mean fraction at each budget
(to BUDGETS[-1]), how many runs evaluated a configuration within 0.95 by 50, and the mean at 50
that the other spaces would need for the average to reach TARGET with this one where it is; then
after how many evaluations the default's mean over the spaces reaches TARGET.

    python results/bench/search_variants/bounds.py --seeds 0:20
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from autotune.bench.search import load_cases  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from variants import trajectory  # noqa: E402  (the same replay, no variant installed)

BUDGETS = (10, 20, 50, 100)
AT = 50
TARGET = 0.95


def run(case, seed: int) -> list[float]:
    """The default's fraction of the optimum after each evaluation, to BUDGETS[-1]."""
    return trajectory(case, seed, BUDGETS[-1])


def within(case, share: float) -> int:
    return sum(1 for t in case.ok.values() if t is not None and case.optimum_ms / t >= share)


@click.command()
@click.option("--seeds", default="0:20", show_default=True, help="first:last (exclusive)")
@click.option("--recordings", default=str(ROOT / "results/recordings/kernel_tuner"))
def main(seeds: str, recordings: str) -> None:
    cases, _ = load_cases([recordings])
    first, last = (int(s) for s in seeds.split(":"))
    means, hits, curves = {}, {}, []
    for case in cases:
        runs = np.array([run(case, seed) for seed in range(first, last)])
        means[case.name] = {b: float(runs[:, b - 1].mean()) for b in BUDGETS}
        hits[case.name] = int((runs[:, AT - 1] >= 0.95).sum())
        curves.append(runs.mean(axis=0))
    n = len(cases)
    head = " | ".join(str(b) for b in BUDGETS)
    click.echo(
        f"| space | configs | within 0.95 | within 0.9 | {head} | runs >= 0.95 at {AT} "
        f"| the others' mean at {AT} needed |"
    )
    click.echo("|---|--:|--:|--:|" + "--:|" * len(BUDGETS) + "--:|--:|")
    total = sum(m[AT] for m in means.values())
    for case in cases:
        m = means[case.name]
        figures = " | ".join(f"{m[b]:.3f}" for b in BUDGETS)
        need = (TARGET * n - m[AT]) / (n - 1)
        click.echo(
            f"| {case.name} | {len(case.ok)} | {within(case, 0.95)} | {within(case, 0.9)} | "
            f"{figures} | {hits[case.name]}/{last - first} | {need:.3f} |"
        )
    mean = " | ".join(f"{np.mean([m[b] for m in means.values()]):.3f}" for b in BUDGETS)
    click.echo(f"| mean | | | | {mean} | | |")
    click.echo(f"{TARGET} at {AT} needs +{TARGET * n - total:.3f} summed over the {n} spaces")
    reached = np.flatnonzero(np.mean(curves, axis=0) >= TARGET)
    when = f"after {reached[0] + 1} evaluations" if len(reached) else "not within the budgets"
    click.echo(f"the default's mean reaches {TARGET} {when}")


if __name__ == "__main__":
    main()
