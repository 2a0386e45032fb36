"""`autotune run --gpus` orchestration with fake workers, and `autotune status`: no GPU needed."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import Config
from autotune.store import Store, StudyClaim
from autotune.tuning import workers
from autotune.tuning.workers import (
    GpuListError,
    WorkerSpec,
    gpu_worker_specs,
    parse_gpus,
    run_workers,
    worker_argv,
)

# The mark is made inside the try: a Ctrl-C sent once it exists always lands there.
SLEEPER = """
import pathlib, sys, time
mark = pathlib.Path(sys.argv[1])
try:
    mark.with_suffix(".started").touch()
    time.sleep(120)
except KeyboardInterrupt:
    mark.with_suffix(".stopped").touch()
    sys.exit(130)
"""


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


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


def test_worker_argv_drops_gpus_adds_gpu_and_a_share_of_the_cores() -> None:
    argv = ["run", "--family", "x", "--gpus", "0,1", "--budget", "5"]
    assert worker_argv(argv, 1, 8) == [
        "run", "--family", "x", "--budget", "5", "--jobs", "8", "--gpu", "1"
    ]  # fmt: skip
    assert worker_argv(["run", "--gpus=all", "--jobs", "3"], 0, 8) == [
        "run", "--jobs", "3", "--gpu", "0"
    ]  # fmt: skip
    specs = gpu_worker_specs(["run", "--gpus", "all"], [0, 2], Path("logs"), cores=16)
    assert [s.name for s in specs] == ["gpu0", "gpu2"]
    assert specs[1].argv[1:] == ["-m", "autotune", "run", "--jobs", "8", "--gpu", "2"]
    assert specs[1].log == Path("logs/gpu2.log")


def test_a_failed_worker_makes_the_campaign_fail_and_its_log_is_kept(tmp_path) -> None:
    specs = [
        WorkerSpec("good", _python("print('fine')"), tmp_path / "good.log"),
        WorkerSpec("bad", _python("import sys; print('boom'); sys.exit(3)"), tmp_path / "bad.log"),
    ]
    seen = []
    outcome = run_workers(specs, str(tmp_path / "s.db"), on_progress=seen.append, poll_s=0.05)
    assert outcome.returncodes == {"good": 0, "bad": 3}
    assert outcome.failed == ["bad"] and outcome.exit_code == 1 and not outcome.interrupted
    assert "boom" in (tmp_path / "bad.log").read_text()
    assert seen[-1].alive == 0 and seen[-1].workers == 2 and seen[-1].evaluations == 0


def test_ctrl_c_stops_every_worker_cleanly(tmp_path) -> None:
    marks = [tmp_path / f"w{i}.mark" for i in range(3)]
    specs = [
        WorkerSpec(f"w{i}", _python(SLEEPER, str(mark)), tmp_path / f"w{i}.log")
        for i, mark in enumerate(marks)
    ]

    def interrupt_once_all_started(progress) -> None:
        if all(m.with_suffix(".started").exists() for m in marks):
            raise KeyboardInterrupt  # as a terminal's Ctrl-C reaches the parent

    began = time.monotonic()
    outcome = run_workers(
        specs, str(tmp_path / "s.db"), on_progress=interrupt_once_all_started, poll_s=0.05
    )
    assert time.monotonic() - began < 60
    assert outcome.interrupted and outcome.exit_code == 130
    assert outcome.returncodes == {"w0": 130, "w1": 130, "w2": 130}
    assert all(m.with_suffix(".stopped").exists() for m in marks)  # each ran its own clean stop


@pytest.mark.parametrize("inherited", ["blocked", "ignored"])
def test_workers_stop_on_ctrl_c_whatever_sigint_state_the_parent_had(tmp_path, inherited) -> None:
    """A harness, a thread or a script's `cmd &` may start the campaign with SIGINT blocked or
    ignored; its workers inherited that, never saw the stop, and were killed (exit -9)."""
    marks = [tmp_path / f"w{i}.mark" for i in range(2)]
    specs = [WorkerSpec(m.stem, _python(SLEEPER, str(m)), m.with_suffix(".log")) for m in marks]

    def interrupt_once_all_started(progress) -> None:
        if all(m.with_suffix(".started").exists() for m in marks):
            raise KeyboardInterrupt

    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    handler = signal.getsignal(signal.SIGINT)
    if inherited == "blocked":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    else:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        outcome = run_workers(
            specs,
            str(tmp_path / "s.db"),
            on_progress=interrupt_once_all_started,
            poll_s=0.05,
            stop_grace_s=10,
        )
        # What the parent had is what it has after starting them.
        assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask | (
            {signal.SIGINT} if inherited == "blocked" else set()
        )
        assert (signal.getsignal(signal.SIGINT) == signal.SIG_IGN) == (inherited == "ignored")
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, handler)
    assert outcome.returncodes == {"w0": 130, "w1": 130}
    assert all(m.with_suffix(".stopped").exists() for m in marks)


def test_a_worker_ignoring_ctrl_c_is_killed_after_the_grace(tmp_path) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(120)"
    specs = [WorkerSpec("w", _python(stubborn), tmp_path / "w.log")]
    calls = []

    def interrupt(progress) -> None:
        calls.append(progress)
        if len(calls) == 3:
            raise KeyboardInterrupt

    began = time.monotonic()
    outcome = run_workers(
        specs, str(tmp_path / "s.db"), on_progress=interrupt, poll_s=0.05, stop_grace_s=0.5
    )
    assert time.monotonic() - began < 30
    assert outcome.interrupted and outcome.returncodes["w"] < 0  # killed by a signal


def test_run_gpus_cli_starts_one_worker_per_gpu_and_fails_if_one_does(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    made = []

    def fake_specs(argv, gpus, log_dir, cores=None):
        made.append((list(argv), list(gpus), log_dir))
        code = "import sys; print('worker', sys.argv[1]); sys.exit(int(sys.argv[1]) == 1)"
        return [WorkerSpec(f"gpu{g}", _python(code, str(g)), log_dir / f"gpu{g}.log") for g in gpus]

    monkeypatch.setattr(workers, "gpu_worker_specs", fake_specs)
    argv = ["run", "--family", "direct_naive", "--gpus", "0,1", "--storage", "s.db"]
    monkeypatch.setattr(sys, "argv", ["autotune", *argv])
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 1, result.output
    assert made[0][:2] == (argv, [0, 1])
    assert "worker gpu1 failed (exit code 1)" in result.output and "worker 1" in result.output
    assert "2 workers" in result.output
    logs = sorted(p.name for p in made[0][2].glob("*.log"))
    assert logs == ["gpu0.log", "gpu1.log"] and made[0][2].parent == Path("results/logs")

    argv = ["run", "--gpus", "0", "--storage", "s.db"]
    monkeypatch.setattr(sys, "argv", ["autotune", *argv])
    assert CliRunner().invoke(main, argv).exit_code == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpus", "0,x"], "expected 'all' or indices"),
        (["--gpus", "0,0"], "named twice"),
        (["--gpus", "0,1", "--gpu", "1"], "cannot be combined"),
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
