"""The scheduler's contract over both transports: the same small campaign (six direct_naive
studies on two synthetic GPUs, real compiler and store) through local worker processes and
through Ray actors tunes every study once, no configuration twice, the union a single run's;
Ctrl-C stops both cleanly (no claim left, every run finished, exit 130) and the same campaign
then resumes to the same end. On SQLite and on a private PostgreSQL server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign_worker import evaluated as logged
from tests.pg_server import pg_server, pg_url  # noqa: F401 - fixtures
from tests.ray_synthetic import EVAL_LOG, WORKER
from tests.system import test_postgres_campaigns as worker_campaigns
from tests.system import test_ray_campaigns as ray_campaigns

storage = worker_campaigns.storage
expected = worker_campaigns.expected
_check_database = worker_campaigns._check_database
_stored = worker_campaigns._stored
_confirmed = worker_campaigns.confirmed
ray_cluster = ray_campaigns.ray_cluster  # a Ray head with two fake GPUs; its evaluation log
_request = ray_campaigns._request
FAKE_GPUS = ray_campaigns.FAKE_GPUS

pytestmark = pytest.mark.slow  # worker processes and a Ray cluster

ROOT = Path(__file__).resolve().parents[2]
TRANSPORTS = ["local", "ray"]


def _transport(kind: str, storage: str, cache: Path, log: Path, tmp_path: Path):
    from autotune.tuning.worker_session import CampaignFactory, absolute_paths

    factory = CampaignFactory(absolute_paths(_request(storage, cache)))
    if kind == "ray":
        from autotune.tuning.ray_transport import RayTransport

        return RayTransport(factory, storage, jobs=1)
    from autotune.tuning.processes import LocalProcesses

    env = {"PYTHONPATH": str(ROOT), EVAL_LOG: str(log)}
    gpus = range(FAKE_GPUS)
    return LocalProcesses(factory, gpus, tmp_path / "logs", jobs=1, env=env, command=WORKER)


def _run(kind, storage, cache, log, tmp_path, on_progress=None):
    from autotune.tuning.scheduler import run_campaign

    transport = _transport(kind, storage, cache, log, tmp_path)
    return run_campaign(transport, storage, on_progress=on_progress, poll_s=0.2, stop_grace_s=60)


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_each_transport_tunes_each_study_once(kind, storage, expected, ray_cluster, tmp_path):
    cache, rows = expected
    log = ray_cluster  # the actors log there; the local workers are told to as well
    log.unlink(missing_ok=True)
    outcome = _run(kind, storage, cache, log, tmp_path)
    assert outcome.exit_code == 0, outcome.errors
    reported = sorted(r.key[1] for r in outcome.reports)
    assert reported == sorted({row[1] for row in rows})  # every study handed out once
    assert _stored(storage) == rows  # the union is exactly the single run's
    configs = [defines for _, defines in logged(log)]
    assert len(set(configs)) == len(rows)  # nothing lost
    # Nothing twice but each study's best, measured twice more by the worker that tuned it.
    assert len(configs) == len(rows) + _confirmed(storage, rows)
    assert len({pid for pid, _ in logged(log)}) == FAKE_GPUS  # both workers tuned
    _check_database(storage)  # no claim left, every run (the driver's too) finished


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_ctrl_c_stops_each_transport_cleanly_and_it_resumes(
    kind, storage, expected, ray_cluster, tmp_path
):
    cache, rows = expected
    log = ray_cluster
    log.unlink(missing_ok=True)

    def interrupt_mid_campaign(progress) -> None:
        if len(logged(log)) >= 10 and progress.studies_held == FAKE_GPUS:
            raise KeyboardInterrupt  # as a terminal's Ctrl-C reaches the driver

    outcome = _run(kind, storage, cache, log, tmp_path, interrupt_mid_campaign)
    assert outcome.interrupted and outcome.exit_code == 130 and not outcome.failed
    # The studies in flight stopped between two evaluations (a report saying so, or Ray's
    # cancelled call): none of them is reported done.
    assert all(r.interrupted for r in outcome.reports[-FAKE_GPUS:]) or kind == "ray"
    first = len(logged(log))
    assert 10 <= first < len(rows)
    _check_database(storage)  # every worker finished its run; no claim left

    again = _run(kind, storage, cache, log, tmp_path)
    assert again.exit_code == 0, again.errors
    assert _stored(storage) == rows
    configs = [defines for _, defines in logged(log)]
    # At most the measurement in flight in each worker at the stop is done again (each
    # study's best measured twice more aside).
    again = len(configs) - len(rows) - _confirmed(storage, rows)
    assert len(set(configs)) == len(rows) and 0 <= again <= FAKE_GPUS
    _check_database(storage)


def test_the_worker_entry_point_runs_without_the_command_line() -> None:
    """The local transport's worker is a module of tuning/, not a CLI command: importing it
    loads no click command."""
    code = "import sys, autotune.tuning.worker_process; print('autotune.cli.app' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
