"""Benchmarks of the tool itself (`autotune bench ...`): each command measures something and
writes its figures under results/bench/. One module per benchmark; each adds its command to the
`bench` group below."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def bench() -> None:
    """Measure the tool itself; figures go under results/bench/."""


# Each benchmark module adds its command to `bench` when imported (one line per module below).
from autotune.bench import search  # noqa: E402, F401

# isort: split
from autotune.bench import throughput  # noqa: E402, F401

# isort: split
from autotune.bench import scaling  # noqa: E402, F401
