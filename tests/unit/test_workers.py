"""`autotune run --gpus`: the scheduler's local transport with real worker processes running
sessions without a GPU (tests/fake_sessions.py), and `autotune status`."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import Config
from autotune.store import Store, StudyClaim
from autotune.tuning.processes import GpuListError, LocalProcesses, parse_gpus, worker_jobs
from autotune.tuning.scheduler import run_campaign
from tests.fake_sessions import FakeFactory, tuned

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT)}  # the workers unpickle tests.fake_sessions
COSTS = tuple((f"s{i}", float(i)) for i in range(6))


def test_parse_gpus() -> None:
    assert parse_gpus("0,1", lambda: pytest.fail("counted")) == [0, 1]
    assert parse_gpus(" 3 ", lambda: 0) == [3]
    assert parse_gpus("all", lambda: 2) == [0, 1]
    assert parse_gpus("ALL", lambda: 1) == [0]
    for bad in ("", "x", "0,,x", "-1", "1,1"):
        with pytest.raises(GpuListError):
            parse_gpus(bad, lambda: 2)
    with pytest.raises(GpuListError, match="no CUDA device"):
        parse_gpus("all", lambda: 0)


def _campaign(tmp_path, gpus=(0, 1), on_progress=None, grace_s=30.0, **fake):
    storage, log = str(tmp_path / "s.db"), tmp_path / "tuned.log"
    factory = FakeFactory(storage, str(log), fake.pop("costs", COSTS), **fake)
    transport = LocalProcesses(factory, gpus, tmp_path / "logs", jobs=1, env=ENV)
    outcome = run_campaign(
        transport, storage, on_progress=on_progress, poll_s=0.05, stop_grace_s=grace_s
    )
    return outcome, log


def test_worker_jobs_share_the_cores_among_the_gpus() -> None:
    assert worker_jobs(2, None, cores=16) == 8
    assert worker_jobs(3, None, cores=2) == 1  # never none
    assert worker_jobs(2, 5, cores=16) == 5  # --jobs given: each worker's


def test_local_workers_tune_each_study_once_longest_first(tmp_path) -> None:
    seen = []
    # The two workers start their first studies together: on a loaded machine (CI run 53) one
    # started after the other had tuned all six.
    outcome, log = _campaign(tmp_path, on_progress=seen.append, together=(0, 1))
    assert outcome.exit_code == 0, outcome.errors
    assert outcome.returncodes == {"gpu0": 0, "gpu1": 0}
    keys = [key for _, _, key in tuned(log)]
    assert sorted(keys) == sorted(k for k, _ in COSTS)  # each once, none twice
    assert keys[:2] == ["s5", "s4"] or keys[:2] == ["s4", "s5"]  # the longest first
    assert {gpu for _, gpu, _ in tuned(log)} == {0, 1}  # both GPUs' workers tuned
    assert len({pid for pid, _, _ in tuned(log)}) == 2
    assert all((tmp_path / f"tuned.log.closed.{g}").exists() for g in (0, 1))  # runs finished
    assert seen[-1].alive == 0 and (seen[-1].studies_done, seen[-1].studies_total) == (6, 6)
    with Store(str(tmp_path / "s.db")) as store:
        assert store.claims().empty


@pytest.mark.parametrize("late_s", [0.0, 2.0])
def test_a_worker_that_cannot_open_leaves_its_share_to_the_others(tmp_path, late_s) -> None:
    # Late: the other worker has tuned every study (6 x 0.05 s) before this one says why it
    # cannot open (CI run 65 lost that reason on a loaded machine).
    outcome, log = _campaign(tmp_path, fail_open_gpu=1, fail_open_after_s=late_s)
    assert outcome.returncodes == {"gpu0": 0, "gpu1": 1} and outcome.exit_code == 1
    assert "GPU 1 is not there" in outcome.errors["gpu1"]
    assert sorted(key for _, _, key in tuned(log)) == sorted(k for k, _ in COSTS)


def test_a_dead_workers_study_is_tuned_by_another(tmp_path) -> None:
    outcome, log = _campaign(tmp_path, die_on="s3")
    assert outcome.exit_code == 0, outcome.errors
    assert sorted(key for _, _, key in tuned(log)) == sorted(k for k, _ in COSTS)
    (dead,) = [n for n, e in outcome.errors.items() if "went to another worker" in e]
    assert "exit code 9" in outcome.errors[dead]


def _interrupt_once_started(tmp_path, gpus):
    def interrupt(progress) -> None:
        if all((tmp_path / f"tuned.log.started.{g}").exists() for g in gpus):
            raise KeyboardInterrupt  # as a terminal's Ctrl-C reaches the driver

    return interrupt


def test_ctrl_c_stops_every_worker_cleanly(tmp_path) -> None:
    gpus = (0, 1, 2)
    began = time.monotonic()
    outcome, _ = _campaign(
        tmp_path, gpus, on_progress=_interrupt_once_started(tmp_path, gpus), wait_for_stop=True
    )
    assert time.monotonic() - began < 60
    assert outcome.interrupted and outcome.exit_code == 130 and not outcome.failed
    assert outcome.returncodes == {"gpu0": 130, "gpu1": 130, "gpu2": 130}
    for g in gpus:  # each ran its own clean stop, then finished its run
        assert (tmp_path / f"tuned.log.stopped.{g}").exists()
        assert (tmp_path / f"tuned.log.closed.{g}").exists()
    assert all(r.interrupted for r in outcome.reports)


@pytest.mark.parametrize("inherited", ["blocked", "ignored"])
def test_workers_stop_on_ctrl_c_whatever_sigint_state_the_parent_had(tmp_path, inherited) -> None:
    """A harness, a thread or a script's `cmd &` may start the campaign with SIGINT blocked or
    ignored; its workers inherited that, never saw the stop, and were killed (exit -9)."""
    gpus = (0, 1)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    handler = signal.getsignal(signal.SIGINT)
    if inherited == "blocked":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    else:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        outcome, _ = _campaign(
            tmp_path,
            gpus,
            on_progress=_interrupt_once_started(tmp_path, gpus),
            grace_s=10,
            wait_for_stop=True,
        )
        # What the parent had is what it has after starting them.
        assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask | (
            {signal.SIGINT} if inherited == "blocked" else set()
        )
        assert (signal.getsignal(signal.SIGINT) == signal.SIG_IGN) == (inherited == "ignored")
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, handler)
    assert outcome.returncodes == {"gpu0": 130, "gpu1": 130}
    assert all((tmp_path / f"tuned.log.stopped.{g}").exists() for g in gpus)


def test_a_worker_ignoring_ctrl_c_is_killed_after_the_grace(tmp_path) -> None:
    began = time.monotonic()
    outcome, _ = _campaign(
        tmp_path,
        (0,),
        on_progress=_interrupt_once_started(tmp_path, (0,)),
        grace_s=0.5,
        wait_for_stop=True,
        ignore_sigint=True,
    )
    assert time.monotonic() - began < 30
    assert outcome.interrupted and outcome.returncodes["gpu0"] < 0  # killed by a signal


def test_run_gpus_cli_starts_a_worker_per_gpu_and_fails_if_they_do(tmp_path, monkeypatch) -> None:
    """The whole command on a machine without a GPU: each worker process fails to open its GPU,
    says why in one line, and the command exits 1 with one summary."""
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--family", "direct_naive", "--shapes", "smoke", "--gpus", "0,1"]
    result = CliRunner().invoke(main, [*argv, "--storage", "s.db"])
    assert result.exit_code == 1, result.output
    assert "2 workers (GPUs 0, 1)" in result.output
    assert "worker gpu0 failed (exit code 1)" in result.output
    assert "worker gpu1 failed (exit code 1)" in result.output
    assert "Traceback" not in result.output
    logs = sorted(p.name for p in Path("results/logs").glob("run-*/*.log"))
    assert logs == ["gpu0.log", "gpu1.log"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpus", "0,x"], "expected 'all' or indices"),
        (["--gpus", "0,0"], "named twice"),
        (["--gpus", "0,1", "--gpu", "1"], "cannot be combined"),
        (["--gpus", "0", "--family", "sgemm", "--shapes", "smoke"], "nothing to tune"),
    ],
)
def test_run_gpus_bad_input_is_a_usage_error(args, message, tmp_path) -> None:
    result = CliRunner().invoke(main, ["run", *args, "--storage", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and message in result.output


@pytest.mark.slow
def test_status_cli_shows_runs_and_claims(tmp_path) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        device_id = store.register_device(DeviceInfo("Synthetic GPU", "9.0", 132))
        live = store.start_run(device_id, "autotune run --gpu 0", {})
        done = store.start_run(device_id, "autotune run --gpu 7 (long ago)", {})
        store.finish_run(done)
        holder = StudyClaim(live, "node-3", 999, time.time() + 300)
        assert (
            store.claim(device_id, "direct_naive", "N=9,K=3,C=1,F=2", holder, time.time()) is None
        )
        config = Config.of({"BLOCK_X": 8, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
        from autotune.model.problem import ConvProblem

        problem = ConvProblem(N=9, K=3, C=1, F=2)
        store.record(live, device_id, "direct_naive", problem, config, _ok(), problem.flops)
    result = CliRunner().invoke(main, ["status", "--storage", str(db)])
    assert result.exit_code == 0, result.output
    assert "autotune run --gpu 0" in result.output and "--gpu 7" not in result.output
    assert "node-3" in result.output and "N=9,K=3,C=1,F=2" in result.output
    assert "running" in result.output
    every = CliRunner().invoke(main, ["status", "--all", "--storage", str(db)])
    assert "--gpu 7" in every.output and "finished" in every.output
    missing = CliRunner().invoke(main, ["status", "--storage", str(tmp_path / "none.db")])
    assert missing.exit_code == 1 and "no results database" in missing.output


def _ok() -> Measurement:
    return Measurement.from_samples([1.0])
