"""Benchmarks of the tool itself (`autotune bench ...`): each command measures something and
writes its figures under results/bench/. One module per benchmark; its command is added to the
`bench` group below."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def bench() -> None:
    """Measure the tool itself; figures go under results/bench/."""


# Registered here, not by the modules themselves, so that no benchmark imports this package back.
from autotune.bench import (  # noqa: E402
    dispatch,
    kt_examples,
    model,
    plan_choice,
    scaling,
    search,
    throughput,
)

bench.add_command(search.search)
bench.add_command(throughput.throughput)
bench.add_command(scaling.scaling)
bench.add_command(dispatch.dispatch)
bench.add_command(kt_examples.kt_examples)
bench.add_command(model.model)
bench.add_command(plan_choice.plan_choice)
