"""`run --ray` without a cluster (the scheduler's Ray transport): where actors may go and with
how many compile processes, the command line's checks, and the message when Ray is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.model.shapes import ShapeSelection
from autotune.tuning.campaign import RunRequest
from autotune.tuning.ray_transport import (
    RayUnavailable,
    check_placement,
    connect,
    gpu_nodes,
    is_sqlite,
    node_jobs,
)
from autotune.tuning.worker_session import absolute_paths

PG = "postgresql+psycopg://u:secret@db/autotune"


def _node(node_id: str, cpus: int, gpus: int, alive: bool = True) -> dict:
    resources = {"CPU": float(cpus), **({"GPU": float(gpus)} if gpus else {})}
    return {"NodeID": node_id, "Alive": alive, "Resources": resources}


def test_gpu_nodes_are_the_live_nodes_with_gpus() -> None:
    nodes = [_node("head", 8, 0), _node("a", 32, 4), _node("b", 16, 2, alive=False)]
    assert gpu_nodes(nodes) == {"a": 4}


def test_actors_go_to_every_gpu_on_postgresql_and_to_this_node_only_on_sqlite() -> None:
    assert check_placement(PG, {"a": 4, "b": 2}, here="head") == 6
    assert check_placement("results/autotune.db", {"head": 2}, here="head") == 2
    assert check_placement("sqlite:////tmp/x.db", {"head": 1}, here="head") == 1
    with pytest.raises(RayUnavailable, match="SQLite file on this machine.*1 other node"):
        check_placement("results/autotune.db", {"head": 2, "a": 4}, here="head")
    with pytest.raises(RayUnavailable, match="PostgreSQL"):
        check_placement("sqlite:////tmp/x.db", {"a": 4}, here="head")  # a GPU-less head
    with pytest.raises(RayUnavailable, match="no GPU"):
        check_placement(PG, {}, here="head")
    with pytest.raises(RayUnavailable) as err:  # a password never reaches a message
        check_placement(PG.replace("postgresql+psycopg", "sqlite"), {"a": 1}, here="h")
    assert "secret" not in str(err.value)
    assert is_sqlite("x.db") and is_sqlite("sqlite:///x.db") and not is_sqlite(PG)


def test_compile_processes_share_the_nodes_cores_among_its_gpus() -> None:
    nodes = [_node("a", 32, 4), _node("b", 3, 8), _node("c", 0, 2)]
    assert node_jobs(nodes, "a") == 8
    assert node_jobs(nodes, "b") == 1  # never none
    assert node_jobs(nodes, "c", fallback=6) == 3  # a node that declares no CPUs: its cores
    assert node_jobs(nodes, "gone", fallback=5) == 5


def test_the_actors_are_given_absolute_paths(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    request = RunRequest(
        storage="r/a.db",
        cache_dir=Path("cubins"),
        kernel_dirs=(Path("k"),),
        selection=ShapeSelection(files=("s",)),
    )
    done = absolute_paths(request)
    assert done.storage == str(tmp_path / "r/a.db") and done.cache_dir == tmp_path / "cubins"
    assert done.kernel_dirs == (tmp_path / "k",) and done.selection.files == (str(tmp_path / "s"),)
    assert absolute_paths(RunRequest(storage=PG)).storage == PG


@pytest.mark.parametrize(
    "args, address",
    [
        (["--ray"], None),
        (["--ray", "auto"], "auto"),
        (["--ray=ray://head:10001"], "ray://head:10001"),
    ],
)
def test_run_ray_hands_the_request_to_the_driver(args, address, tmp_path, monkeypatch) -> None:
    import autotune.cli.ray_run as ray_run

    seen = []
    monkeypatch.setattr(ray_run, "run_on_ray", lambda a, request: seen.append((a, request)) or 3)
    argv = ["run", *args, "--family", "direct_naive", "--budget", "5", "--storage", PG]
    monkeypatch.setattr(sys, "argv", ["autotune", *argv])
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 3, result.output
    ((got, request),) = seen
    assert got == address and request.families == ("direct_naive",) and request.budget == 5
    assert request.storage == PG and "secret" not in request.command


@pytest.mark.parametrize("extra", [["--gpus", "0,1"], ["--gpu", "1"], ["--replay", "."]])
def test_run_ray_with_gpu_gpus_or_replay_is_a_usage_error(extra) -> None:
    result = CliRunner().invoke(main, ["run", "--ray", *extra, "--storage", PG])
    assert result.exit_code == 2 and "cannot be combined" in result.output, result.output


def test_without_ray_the_message_says_how_to_install_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    with pytest.raises(RayUnavailable, match=r"pip install 'autotune-dse\[ray\]'"):
        connect(None)
    args = ["run", "--ray", "--family", "direct_naive", "--storage", str(tmp_path / "s.db")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "autotune-dse[ray]" in result.output
    assert "Traceback" not in result.output


def test_run_ray_refuses_a_campaign_that_cannot_run_before_ray_starts(tmp_path) -> None:
    args = ["run", "--ray", "--family", "sgemm", "--shapes", "smoke"]
    result = CliRunner().invoke(main, [*args, "--storage", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and "nothing to tune" in result.output
    assert "sgemm computes gemm problems" in result.output
    bad = CliRunner().invoke(
        main, ["run", "--ray", "--storage", "postgresql+psycopg://x@/y?host=/no"]
    )
    assert bad.exit_code == 1 and "cannot open results database" in bad.output
