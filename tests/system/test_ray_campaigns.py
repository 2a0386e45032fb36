"""`autotune run --ray` on a local Ray cluster of this machine (two fake GPUs, the synthetic
evaluator in every actor), on SQLite and on a private PostgreSQL server: the union of the actors'
work is a single run's, nothing is evaluated twice, a killed actor's study is finished after Ray
restarts it, nothing is lost."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.campaign_worker import SIX_PROBLEMS
from tests.campaign_worker import evaluated as logged
from tests.pg_server import pg_server, pg_url  # noqa: F401 - fixtures
from tests.ray_synthetic import EVAL_LOG
from tests.system.test_postgres_campaigns import (  # noqa: F401 - fixtures
    _check_database,
    _stored,
    expected,
    storage,
)

pytestmark = pytest.mark.slow  # a Ray cluster and its actors: out of the quick loop

ROOT = Path(__file__).resolve().parents[2]
FAKE_GPUS = 2


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
    from autotune.cli.campaign import RunRequest

    return RunRequest(
        families=("direct_naive",),
        shapes=tuple(p.key for p in SIX_PROBLEMS),
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
    assert len(configs) == len(set(configs)) == len(rows)  # nothing twice, nothing lost
    assert len({pid for pid, _ in evaluated}) == FAKE_GPUS  # both actors tuned studies
    _check_database(storage)  # no claims written or left, every actor's run finished


def test_a_killed_actors_study_is_finished_by_its_restart(storage, expected, ray_cluster) -> None:
    cache, rows = expected
    ray_cluster.unlink(missing_ok=True)
    killed: list[int] = []

    def kill_the_first_actor_mid_study() -> None:
        waited = time.monotonic()
        while time.monotonic() - waited < 120:
            evaluated = logged(ray_cluster)
            if len(evaluated) >= 3:
                victim = evaluated[0][0]
                if sum(pid == victim for pid, _ in evaluated) >= 3:
                    os.kill(victim, signal.SIGKILL)
                    killed.append(victim)
                    return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_first_actor_mid_study, daemon=True)
    killer.start()
    code = _campaign(storage, cache)
    killer.join(timeout=5)
    assert killed, "no actor was killed"
    assert code == 0  # Ray restarted the actor and retried its study
    assert _stored(storage) == rows  # nothing lost
    evaluated = logged(ray_cluster)
    configs = [defines for _, defines in evaluated]
    # At most the evaluation in flight at the kill (done, not yet recorded) is done again.
    assert len(configs) - len(set(configs)) <= 1 and len(set(configs)) == len(rows)
    pids = {pid for pid, _ in evaluated}
    assert killed[0] in pids and len(pids) > FAKE_GPUS  # the restarted actor is a new process
    _check_database(storage, killed=1)  # only the killed actor's run is left unfinished
