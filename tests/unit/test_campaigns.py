"""Where the data lives: the default database, committed campaign files read beneath it, the
bests shipped as package data, and the packing of a results database into a campaign file."""

from __future__ import annotations

import gzip
import json

from click.testing import CliRunner

from autotune.cli.app import main
from autotune.families import FAMILIES
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import Config
from autotune.runtime.lookup import Catalogue
from autotune.store import Store
from autotune.store.campaigns import shipped_best, write_best_files
from autotune.store.location import default_storage
from autotune.store.samples import pack, pack_json, unpack

PROBLEM = ConvProblem(N=29, K=5, C=7, F=9)
DEVICE = DeviceInfo(name="NVIDIA H100 80GB HBM3", compute_capability="9.0", sm_count=132)


def _measured(path, time_ms=1.0, digest=None) -> Store:
    store = Store(str(path))
    device = store.register_device(DEVICE)
    run = store.start_run(device, "autotune run", {})
    digest = FAMILIES["direct_naive"].kernel_digest() if digest is None else digest
    m = Measurement.from_samples([time_ms, time_ms * 1.01, time_ms * 0.99])
    config = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
    store.record(run, device, "direct_naive", PROBLEM, config, m, PROBLEM.flops, digest)
    return store


def test_samples_pack_losslessly_and_small() -> None:
    samples = [1.66208, 1.654496, 1.657088, 1.656032, 1.655616]
    packed = pack(samples)
    assert unpack(packed) == samples and len(packed) < 2 * len(samples) + 4
    assert unpack(pack_json(json.dumps(samples))) == samples
    assert unpack(pack([])) == [] and unpack(pack([float("inf"), 1.0])) == [float("inf"), 1.0]
    assert unpack(pack([0.5, 0.0000014])) == [0.5, 0.000001]  # kept to the nanosecond


def test_the_default_database_is_the_users_unless_named(tmp_path) -> None:
    assert default_storage({"HOME": "/h", "XDG_DATA_HOME": str(tmp_path)}) == str(
        tmp_path / "autotune" / "autotune.db"
    )
    assert default_storage({"AUTOTUNE_DB": "sqlite:///x.db"}) == "sqlite:///x.db"


def test_a_packed_campaign_is_read_beneath_the_default_database(tmp_path, monkeypatch) -> None:
    _measured(tmp_path / "source.db").close()
    repo = tmp_path / "repo"
    campaign = repo / "results" / "campaigns" / "0001.db.gz"
    runner = CliRunner()
    result = runner.invoke(
        main,
        ["data", "pack", str(campaign), "--best-dir", str(tmp_path / "best")]
        + ["--storage", str(tmp_path / "source.db")],
    )
    assert result.exit_code == 0, result.output
    assert gzip.open(campaign).read(16) == b"SQLite format 3\x00"
    again = runner.invoke(main, ["data", "pack", str(campaign), "--storage", "x.db"])
    assert again.exit_code != 0  # never rewritten
    # A fresh clone: no database of the user's yet; `best` finds the committed results.
    monkeypatch.chdir(repo)
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "user" / "autotune.db"))
    first = runner.invoke(main, ["best", "--format", "csv"])
    assert first.exit_code == 0, first.output
    assert "merged the committed campaign 0001.db.gz" in first.output
    assert "direct_naive" in first.output
    second = runner.invoke(main, ["best", "--format", "csv"])
    assert "merged" not in second.output  # once per campaign file
    with Store(str(tmp_path / "user" / "autotune.db")) as user:
        assert len(user.history()) == 1
    # The shipped bests: one small file per device.
    (shipped,) = (tmp_path / "best").iterdir()
    assert shipped.name == "nvidia-h100-80gb-hbm3.json"
    assert len(shipped_best(DEVICE.name, 2, tmp_path / "best")) == 1


def test_the_runtime_takes_shipped_bests_and_the_users_override_them(tmp_path, monkeypatch):
    with _measured(tmp_path / "shipped.db", time_ms=2.0) as store:
        write_best_files(store, tmp_path / "best")
    monkeypatch.setattr(
        "autotune.runtime.lookup.shipped_best",
        lambda device, protocol: shipped_best(device, protocol, tmp_path / "best"),
    )
    empty = Store(str(tmp_path / "empty.db"))
    catalogue = Catalogue.from_store(empty, DEVICE.name)
    assert [s.time_ms for s in catalogue.best[PROBLEM.key]] == [2.0]
    with _measured(tmp_path / "mine.db", time_ms=1.0) as mine:
        catalogue = Catalogue.from_store(mine, DEVICE.name)
    assert [s.time_ms for s in catalogue.best[PROBLEM.key]] == [1.0]
    # A shipped best of other code than the family's current serves nothing.
    with _measured(tmp_path / "stale.db", digest="0" * 16) as stale:
        write_best_files(stale, tmp_path / "best")
    assert Catalogue.from_store(empty, DEVICE.name).best == {}
