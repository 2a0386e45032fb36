"""Reports from the store: markdown and CSV tables, GFlop/s plots, the empty store."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from autotune.problem import ConvProblem
from autotune.records import DeviceInfo, Measurement, Status
from autotune.report import ReportError, best_table, format_table, plot_gflops
from autotune.space import Config
from autotune.store import Store

REQUIRED_CSV = "device,family,B,N,K,C,F,stride,config,time_ms,gflops"
SHAPES = [ConvProblem(N=n, K=3, C=c, F=16) for n, c in ((64, 3), (32, 16), (16, 64))]


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "autotune.db")
    yield s
    s.close()


def fill(store: Store, device: DeviceInfo, families: tuple[str, ...]) -> None:
    device_id = store.register_device(device)
    run_id = store.start_run(device_id, "autotune run", {})
    for family in families:
        for problem in SHAPES:
            for tile, time_ms in ((4, 0.3), (8, 0.1234567)):
                m = Measurement.from_samples([time_ms], registers=32, smem_bytes=2048)
                config = Config.of({"TILE": tile})
                store.record(run_id, device_id, family, problem, config, m, problem.flops)
            wrong = Measurement(Status.WRONG_RESULT, time_ms=0.001, error="a | b\nc")
            config = Config.of({"TILE": 16})
            store.record(run_id, device_id, family, problem, config, wrong, problem.flops)


H100 = DeviceInfo("NVIDIA H100", "9.0", 132, "580.65")
A100 = DeviceInfo("NVIDIA A100", "8.0", 108, "580.65")


def test_best_table_has_shape_and_rounded_values(store: Store) -> None:
    fill(store, H100, ("direct_naive", "tiled"))
    df = best_table(store)
    assert len(df) == 6
    assert set(df["shape"]) == {p.key for p in SHAPES}
    assert set(df["time_ms"]) == {0.1235}
    assert all(Config.from_json(c)["TILE"] == 8 for c in df["config"])
    expected = round(SHAPES[0].flops / 0.1234567e-3 / 1e9, 1)
    assert df[df["N"] == 64]["gflops"].tolist() == [expected, expected]
    assert (df["failures"] == 1).all() and (df["evaluations"] == 3).all()
    assert len(best_table(store, family="tiled")) == 3


def test_markdown_table(store: Store) -> None:
    fill(store, H100, ("direct_naive",))
    df = best_table(store)
    lines = format_table(df, "markdown").splitlines()
    assert len(lines) == 2 + len(SHAPES)
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == list(df.columns)
    separator = [c.strip() for c in lines[1].strip("|").split("|")]
    assert separator[header.index("device")].startswith("---")
    assert not separator[header.index("device")].endswith(":")
    assert separator[header.index("gflops")].endswith(":")
    assert all(line.startswith("| NVIDIA H100") for line in lines[2:])
    assert len({line.count("|") for line in lines}) == 1


def test_markdown_escapes_pipes_and_newlines() -> None:
    df = pd.DataFrame({"error": ["a | b\nc", None], "n": [1.5, float("nan")]})
    lines = format_table(df, "markdown").splitlines()
    assert len(lines) == 4 and "a \\| b c" in lines[2]


def test_csv_table(store: Store) -> None:
    fill(store, H100, ("direct_naive",))
    text = format_table(best_table(store), "csv")
    assert text.splitlines()[0].startswith(REQUIRED_CSV + ",")
    back = pd.read_csv(io.StringIO(text))
    assert len(back) == len(SHAPES)
    assert Config.from_json(back["config"][0]) == Config.of({"TILE": 8})


def test_unknown_format(store: Store) -> None:
    with pytest.raises(ReportError, match="unknown table format"):
        format_table(best_table(store), "html")


@pytest.mark.parametrize("devices", [(H100,), (H100, A100)])
def test_plot_writes_png_and_svg(store: Store, tmp_path: Path, devices) -> None:  # type: ignore[no-untyped-def]
    for device in devices:
        fill(store, device, ("direct_naive", "tiled"))
    paths = plot_gflops(store, tmp_path / "figures" / "gflops")
    assert paths == [tmp_path / "figures" / "gflops.png", tmp_path / "figures" / "gflops.svg"]
    assert paths[0].read_bytes().startswith(b"\x89PNG")
    svg = paths[1].read_text()
    assert "<svg" in svg and "GFlop/s" in svg
    for device in devices:
        assert device.name in svg


def test_empty_store_raises(store: Store, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="^no successful evaluations stored"):
        plot_gflops(store, tmp_path / "gflops")
    fill(store, H100, ("direct_naive",))
    with pytest.raises(ReportError, match="family 'tiled'"):
        plot_gflops(store, tmp_path / "gflops", family="tiled")
    assert not list(tmp_path.glob("gflops.*"))


def test_empty_tables_keep_their_columns(store: Store) -> None:
    df = best_table(store)
    assert df.empty
    assert format_table(df, "csv").startswith(REQUIRED_CSV + ",")
    assert len(format_table(df, "markdown").splitlines()) == 2
