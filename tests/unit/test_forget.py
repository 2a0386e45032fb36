"""`autotune forget`: a family's evaluations go (one device's, one shape's), nothing else does."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from autotune.cli.app import main
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.store import Store

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", 132, "580.65", "13.0", "13.0", 1980, 80 << 30)
A100 = DeviceInfo("NVIDIA A100-SXM4-40GB", "8.0", 108, "580.65")
SMALL = ConvProblem(N=32, K=3, C=16, F=32)
LARGE = ConvProblem(N=64, K=3, C=16, F=32)


def _filled(db: Path) -> None:
    """Two devices x two families x two shapes x two configs, all OK."""
    with Store(db) as store:
        for info in (H100, A100):
            device_id = store.register_device(info)
            run_id = store.start_run(device_id, "autotune run", {})
            for family in ("direct_naive", "chen_general"):
                for problem in (SMALL, LARGE):
                    for tile in (1, 2):
                        m = Measurement(Status.OK, time_ms=float(tile), samples_ms=(float(tile),))
                        config = Config.of({"TILE": tile})
                        store.record(run_id, device_id, family, problem, config, m, problem.flops)


def _counts(db: Path) -> dict[tuple[str, str], int]:
    with Store(db, create=False) as store:
        table = store.best()
    return table.groupby(["device", "family"])["evaluations"].sum().to_dict()


def _forget(db: Path, *args: str, stdin: str | None = None):
    return CliRunner().invoke(main, ["forget", "--storage", str(db), *args], input=stdin)


def test_forget_one_shape_on_one_device(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _filled(db)
    result = _forget(
        db,
        "--family",
        "direct_naive",
        "--device",
        H100.name,
        "--shape",
        "N=32,K=3,C=16,F=32",
        "--yes",
    )
    assert result.exit_code == 0, result.output
    assert "deleted 2 evaluations" in result.output
    counts = _counts(db)
    assert counts[(H100.name, "direct_naive")] == 2  # the other shape's two stay
    assert counts[(A100.name, "direct_naive")] == 4
    assert counts[(H100.name, "chen_general")] == 4


def test_forget_a_family_everywhere_keeps_the_others(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _filled(db)
    result = _forget(db, "--family", "chen_general", "--yes")
    assert result.exit_code == 0, result.output
    assert "deleted 8 evaluations" in result.output
    assert set(_counts(db)) == {(H100.name, "direct_naive"), (A100.name, "direct_naive")}


def test_forget_asks_first_and_a_no_deletes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _filled(db)
    before = _counts(db)
    result = _forget(db, "--family", "chen_general", stdin="n\n")
    assert result.exit_code == 1
    assert "nothing deleted" in result.output
    assert _counts(db) == before


def test_forget_unknown_family_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _filled(db)
    before = _counts(db)
    result = _forget(db, "--family", "nosuch", "--yes")
    assert result.exit_code == 2
    assert "unknown family 'nosuch'" in result.output
    assert _counts(db) == before
