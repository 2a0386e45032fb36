"""The `merge` command: results databases of other machines joined into one."""

from __future__ import annotations

from contextlib import ExitStack

import click

from autotune.cli.options import friendly_errors, storage_option


@click.command()
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@storage_option
@friendly_errors
def merge(sources: tuple[str, ...], storage: str) -> None:
    """Copy every measurement of the SOURCE results databases (SQLite files, gzip'd copies of
    them named *.gz, or SQLAlchemy URLs) into --storage, for campaigns that ran on machines
    without a shared database. Devices are matched by name, compute capability, SM count and
    driver; runs are copied with new ids; evaluations, baselines and ceilings that --storage
    already has are skipped, so merging again adds nothing. Claims are not copied. A source is
    never changed (one of an older schema is upgraded in a temporary copy), and each is added
    in one transaction."""
    from autotune.store import Store, hide_passwords, open_merge_source

    with ExitStack() as stack:
        # Every source is checked before the target is opened: a bad one leaves it untouched.
        opened = [stack.enter_context(open_merge_source(source)) for source in sources]
        target = stack.enter_context(Store(storage))
        for source, store in zip(sources, opened, strict=True):
            counts = target.merge_from(store)
            click.echo(f"merged {hide_passwords(source)}: {counts.line()}")
