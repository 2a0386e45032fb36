"""`autotune run --ray`: the campaign scheduled over Ray actors, one per GPU of the cluster."""

from __future__ import annotations

import click

from autotune.cli.workers import checked_request, schedule
from autotune.tuning.campaign import RunRequest


def run_on_ray(address: str | None, request: RunRequest, init: dict | None = None) -> int:
    """`autotune run --ray [ADDRESS]`: join the cluster, put one actor on each GPU (on this node
    only for a SQLite storage), hand out the studies longest first, show one progress line;
    returns the exit code (non-zero if a study failed, 130 after Ctrl-C)."""
    from autotune.store import hide_passwords
    from autotune.tuning.ray_transport import RayTransport, RayUnavailable, connect
    from autotune.tuning.worker_session import CampaignFactory

    request = checked_request(request)  # here, before any GPU of the cluster starts
    try:
        joined = connect(address, **(init or {}))
    except RayUnavailable as err:
        raise click.UsageError(str(err)) from None
    import ray  # importable: connect() has joined

    try:
        transport = RayTransport(CampaignFactory(request), request.storage, jobs=request.jobs)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        click.echo(
            f"autotune: Ray cluster with {gpus} GPUs on {len(ray.nodes())} nodes; storage "
            f"{hide_passwords(request.storage)}; the actors' output goes to Ray's logs "
            "(/tmp/ray/session_latest/logs on each node)",
            err=True,
        )
        try:
            return schedule(transport, request)
        except RayUnavailable as err:
            raise click.UsageError(str(err)) from None
    finally:
        if joined:
            ray.shutdown()


__all__ = ["run_on_ray"]
