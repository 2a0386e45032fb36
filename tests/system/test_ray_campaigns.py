"""`autotune run --ray` on a local Ray cluster of this machine (two fake GPUs, the synthetic
evaluator in every actor), on SQLite and on a private PostgreSQL server: the union of the actors'
work is a single run's, nothing is evaluated twice, a killed actor's study is finished after Ray
restarts it, nothing is lost."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.campaign_worker import SIX_PROBLEMS
from tests.campaign_worker import evaluated as logged
from tests.pg_server import pg_server, pg_url  # noqa: F401 - fixtures
from tests.ray_synthetic import EVAL_LOG
from tests.system import test_postgres_campaigns as worker_campaigns

# The worker campaigns' fixtures: SQLite or PostgreSQL, and the single run's expected rows.
storage = worker_campaigns.storage
expected = worker_campaigns.expected
_check_database = worker_campaigns._check_database
_stored = worker_campaigns._stored
confirmed = worker_campaigns.confirmed

pytestmark = pytest.mark.slow  # a Ray cluster and its actors: out of the quick loop

ROOT = Path(__file__).resolve().parents[2]
FAKE_GPUS = 2


def test_bench_scaling_runs_the_campaign_with_ray_beside_gpus(tmp_path, monkeypatch) -> None:
    """`autotune bench scaling --ray` end to end on the synthetic GPU: one GPU, `--gpus 0,1` (two
    worker processes) and `--ray local` (a Ray instance of two fake GPUs) each do the whole
    campaign. First in this module: no other Ray instance runs meanwhile."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    from autotune.bench import scaling
    from autotune.cli.app import main

    monkeypatch.chdir(tmp_path)  # the --gpus workers' logs go to results/logs/ here
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setattr(scaling, "AUTOTUNE", [sys.executable, "-m", "tests.ray_synthetic"])
    out = tmp_path / "bench"
    args = ["bench", "scaling", "--gpus", "0,1", "--ray", "--family", "direct_naive"]
    args += ["--shapes", "smoke", "--budget", "3", "--quick-timing", "--output-dir", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    figures = json.loads((out / "scaling.json").read_text())
    runs = figures["runs"]
    assert [(r["runner"], r["gpus"]) for r in runs] == [("gpu", 1), ("gpus", 2), ("ray", 2)]
    assert [(r["evaluations"], r["studies"], r["failures"]) for r in runs] == [(6, 2, 0)] * 3
    assert figures["ray_vs_gpus"] == round(runs[2]["wall_s"] / runs[1]["wall_s"], 3)
    ray_log = (out / "scaling_2gpu-ray.log").read_text()
    assert "2/2 studies done" in ray_log and "by 2 workers" in ray_log


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A Ray head on this machine with two fake GPUs (Ray only counts them; the actors' GPU is
    the synthetic evaluator, which every worker process installs as it starts)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    log = tmp_path_factory.mktemp("ray") / "evaluations.log"
    ray.init(
        num_cpus=2,
        num_gpus=FAKE_GPUS,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={
            "env_vars": {"PYTHONPATH": str(ROOT), EVAL_LOG: str(log)},
            "worker_process_setup_hook": "tests.ray_synthetic.use_synthetic_gpu",
        },
    )
    try:
        yield log
    finally:
        ray.shutdown()


def _request(storage: str, cache: Path):
    from autotune.model.shapes import ShapeSelection
    from autotune.tuning.campaign import RunRequest

    return RunRequest(
        families=("direct_naive",),
        selection=ShapeSelection(shapes=tuple(p.key for p in SIX_PROBLEMS)),
        strategy="random",
        budget=None,  # every configuration: the single run's set, whatever the order
        storage=storage,
        baselines=False,
        cache_dir=cache,
        jobs=1,
        command="autotune run --ray (test)",
    )


def _campaign(storage: str, cache: Path) -> int:
    from autotune.cli.ray_run import run_on_ray

    return run_on_ray(None, _request(storage, cache))  # joins the fixture's cluster


def test_ray_actors_share_the_studies_and_their_union_is_a_single_run(
    storage, expected, ray_cluster
) -> None:
    cache, rows = expected
    ray_cluster.unlink(missing_ok=True)
    assert _campaign(storage, cache) == 0
    assert _stored(storage) == rows  # the union is exactly the single run's
    evaluated = logged(ray_cluster)
    configs = [defines for _, defines in evaluated]
    assert len(set(configs)) == len(rows)  # nothing lost
    # Nothing twice but each study's best, measured twice more by the actor that tuned it.
    assert len(configs) == len(rows) + confirmed(storage, rows)
    assert len({pid for pid, _ in evaluated}) == FAKE_GPUS  # both actors tuned studies
    _check_database(storage)  # no claims written or left, every actor's run finished


def _kill_first_evaluator(log: Path, killed: list[int]) -> None:
    """SIGKILL the process of the first evaluation once it has done three (mid-study)."""
    waited = time.monotonic()
    while time.monotonic() - waited < 120:
        evaluated = logged(log)
        if evaluated:
            victim = evaluated[0][0]
            if sum(pid == victim for pid, _ in evaluated) >= 3:
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
                return
        time.sleep(0.01)


def test_a_killed_actors_study_is_finished_by_its_restart(storage, expected, ray_cluster) -> None:
    cache, rows = expected
    ray_cluster.unlink(missing_ok=True)
    killed: list[int] = []
    killer = threading.Thread(target=_kill_first_evaluator, args=(ray_cluster, killed), daemon=True)
    killer.start()
    code = _campaign(storage, cache)
    killer.join(timeout=5)
    assert killed, "no actor was killed"
    assert code == 0  # Ray restarted the actor and retried its study
    assert _stored(storage) == rows  # nothing lost
    evaluated = logged(ray_cluster)
    configs = [defines for _, defines in evaluated]
    # At most the evaluation in flight at the kill (done, not yet recorded) is done again,
    # besides each study's best measured twice more.
    again = len(configs) - len(set(configs)) - confirmed(storage, rows)
    assert 0 <= again <= 1 and len(set(configs)) == len(rows)
    pids = {pid for pid, _ in evaluated}
    assert killed[0] in pids and len(pids) > FAKE_GPUS  # the restarted actor is a new process
    _check_database(storage, killed=1)  # only the killed actor's run is left unfinished


def test_an_actor_lost_for_good_leaves_its_study_to_another(tmp_path, expected, ray_cluster):
    """Without restarts (a node gone for good), the killed actor's study goes back to the queue
    and the other actor tunes it; the campaign still succeeds and loses nothing."""
    from autotune.tuning.ray_transport import RayTransport
    from autotune.tuning.scheduler import run_campaign
    from autotune.tuning.worker_session import CampaignFactory, absolute_paths

    cache, rows = expected
    storage = str(tmp_path / "shared.db")
    ray_cluster.unlink(missing_ok=True)
    killed: list[int] = []
    killer = threading.Thread(target=_kill_first_evaluator, args=(ray_cluster, killed), daemon=True)
    killer.start()
    request = absolute_paths(_request(storage, cache))
    transport = RayTransport(CampaignFactory(request), storage, max_restarts=0)
    outcome = run_campaign(transport, storage, poll_s=0.2)
    killer.join(timeout=5)
    assert killed and outcome.exit_code == 0, outcome.errors
    assert "lost; its study went to another worker" in "".join(outcome.errors.values())
    assert _stored(storage) == rows
    evaluated = logged(ray_cluster)
    configs = [defines for _, defines in evaluated]
    again = len(configs) - len(set(configs)) - confirmed(storage, rows)
    assert 0 <= again <= 1 and len(set(configs)) == len(rows)
    assert {pid for pid, _ in evaluated} - set(killed)  # the survivor finished the campaign
    assert len({pid for pid, _ in evaluated}) == FAKE_GPUS  # no restart: no third process
    _check_database(storage, killed=1)
