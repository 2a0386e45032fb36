"""Issue 25, 2026-11-27: why the default loses on the convolution_milo spaces (README.md here).

Per space: each combination of the flags (read_only, use_padding, use_shmem) with its median,
90th percentile and best fraction of the optimum over every configuration; the best fraction
per (block_size_y, tile_size_y) in the optimum's corner; and, with --lengths, the kernel lengths
the default fits after 20, 35 and 49 results in a few runs.

    python results/bench/search_variants/milo.py
    python results/bench/search_variants/milo.py --lengths 0:4
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import autotune.strategies.surrogate as S  # noqa: E402
from autotune.bench.search import load_cases  # noqa: E402

FLAGS = ("read_only", "use_padding", "use_shmem")


def fractions(case) -> tuple[list[dict], np.ndarray]:
    configs = case.space.configs
    t = np.array([case.ok[c] if case.ok[c] is not None else np.nan for c in configs])
    return [c.as_dict() for c in configs], case.optimum_ms / t


def corners(case) -> None:
    values, f = fractions(case)
    by_corner = defaultdict(list)
    for d, share in zip(values, f, strict=True):
        by_corner[tuple(d[n] for n in FLAGS)].append(share)
    for corner, shares in sorted(by_corner.items()):
        s = np.array(shares)
        click.echo(
            f"  {FLAGS} = {corner}: {len(s)} configs, median {np.nanmedian(s):.3f}, "
            f"90th percentile {np.nanpercentile(s, 90):.3f}, best {np.nanmax(s):.3f}"
        )
    best = values[int(np.nanargmax(f))]
    click.echo(f"  optimum {best}; best per block_size_y (rows) and tile_size_y in its corner:")
    grid = defaultdict(lambda: np.nan)
    for d, share in zip(values, f, strict=True):
        if all(d[n] == best[n] for n in FLAGS):
            key = (d["block_size_y"], d["tile_size_y"])
            grid[key] = np.nanmax([grid[key], share])
    for y in sorted({k[0] for k in grid}):
        row = " ".join(f"{grid[(y, t)]:.2f}" for t in sorted({k[1] for k in grid}))
        click.echo(f"    block_size_y {y:2d}: {row}")


def lengths(case, seeds: range) -> None:
    coords = S.Coordinates(case.space)
    names = [n for n, p in zip(coords.names, coords.positions, strict=True) if len(p) > 1]
    click.echo(f"  fitted lengths after 20 | 35 | 49 results, per {names}")
    for seed in seeds:
        strategy, fits = S.SurrogateSearch(case.space, seed), []
        for i in range(49):
            config = strategy.ask()
            strategy.tell(config, case.times[config])
            if i + 1 in (20, 35, 49):
                fits.append(" ".join(f"{v:.2f}" for v in strategy._lengths))
        click.echo(f"    seed {seed}: " + " | ".join(fits))


@click.command()
@click.option("--recordings", default=str(ROOT / "results/recordings/kernel_tuner"))
@click.option("--lengths", "seeds", default=None, help="first:last seeds: the fitted lengths")
def main(recordings: str, seeds: str | None) -> None:
    cases, _ = load_cases([recordings])
    for case in cases:
        if case.family != "convolution_milo" and "convolution_milo" not in case.name:
            continue
        click.echo(case.name)
        if seeds:
            first, last = (int(s) for s in seeds.split(":"))
            lengths(case, range(first, last))
        else:
            corners(case)


if __name__ == "__main__":
    main()
