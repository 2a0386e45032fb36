"""Tables, plots and REPORT.md over a store holding FP32 and BF16 results of the same layers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autotune.model.records import DeviceInfo, Measurement
from autotune.model.shapes import named_shapes
from autotune.model.space import Config
from autotune.reports import (
    ReportError,
    Scope,
    best_table,
    plot_gflops,
    plot_roofline,
    plot_speedup,
    write_report,
)
from autotune.store import Store

H100 = DeviceInfo("NVIDIA H100", "9.0", 132, "580.65")
FMA_PEAK, TC_BF16, COPY = 66_000.0, 700_000.0, 3_000.0
LAYERS = named_shapes("alexnet")[1:3]  # conv2 and conv3
BF16 = [dataclasses.replace(p, dtype="bf16", layout="NHWC") for p in LAYERS]
# Our times and cuDNN's, per precision: cuDNN is 2x ours in FP32 and half ours in BF16.
OURS = {"fp32": 1.0, "bf16": 0.2}
CUDNN = {"fp32": 2.0, "bf16": 0.1}


def fill(store: Store, tc_peak: bool = True) -> None:
    device_id = store.register_device(H100)
    run_id = store.start_run(device_id, "autotune run", {})
    store.record_ceiling(device_id, "fma_peak", FMA_PEAK, "GFlop/s", "FMA chains")
    store.record_ceiling(device_id, "copy_bandwidth", COPY, "GB/s", "copy")
    if tc_peak:
        store.record_ceiling(device_id, "tc_peak_bf16", TC_BF16, "GFlop/s", "BF16 GEMM")
    for problem in [*LAYERS, *BF16]:
        dtype = problem.dtype
        family = "implicit_gemm" if dtype == "fp32" else "tc_stand_in"
        m = Measurement.from_samples([OURS[dtype]])
        store.record(run_id, device_id, family, problem, Config.of({"T": 1}), m, problem.flops)
        base = Measurement.from_samples([CUDNN[dtype]])
        store.record_baseline(device_id, "cudnn", problem, "ALGO", "9.19", base, problem.flops)


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "mixed.db")
    fill(s)
    yield s
    s.close()


def test_best_table_divides_by_the_dtypes_peak_and_joins_the_same_dtypes_baseline(store) -> None:
    df = best_table(store)
    assert list(df.columns[df.columns.get_loc("stride") + 1 :][:2]) == ["dtype", "layout"]
    for row in df.itertuples():
        problem = next(p for p in [*LAYERS, *BF16] if p.key == row.shape)
        peak = FMA_PEAK if row.dtype == "fp32" else TC_BF16
        assert row.layout == problem.layout
        gflops = problem.flops / (OURS[row.dtype] * 1e-3) / 1e9
        assert row.efficiency == pytest.approx(gflops / peak, abs=1e-4)
        assert row.speedup == pytest.approx(CUDNN[row.dtype] / OURS[row.dtype])
    assert set(best_table(store, dtype="bf16")["shape"]) == {p.key for p in BF16}


def test_fp32_only_tables_have_no_dtype_columns(tmp_path) -> None:
    s = Store(tmp_path / "fp32.db")
    device_id = s.register_device(H100)
    run_id = s.start_run(device_id, "autotune run", {})
    m = Measurement.from_samples([1.0])
    s.record(run_id, device_id, "implicit_gemm", LAYERS[0], Config.of({"T": 1}), m, 1)
    assert "dtype" not in best_table(s).columns and "layout" not in best_table(s).columns
    s.close()


def test_a_missing_tensor_peak_leaves_only_that_dtypes_efficiency_empty(tmp_path) -> None:
    s = Store(tmp_path / "no_tc.db")
    fill(s, tc_peak=False)
    df = best_table(s)
    assert df.loc[df["dtype"] == "bf16", "efficiency"].isna().all()
    assert df.loc[df["dtype"] == "fp32", "efficiency"].notna().all()
    report = write_report(s, tmp_path / "out").read_text()
    assert "No `tc_peak_bf16` ceiling is stored for NVIDIA H100" in report
    s.close()


def test_plots_keep_precisions_apart(store, tmp_path) -> None:
    svg = plot_gflops(store, tmp_path / "gflops")[1].read_text()
    assert "implicit_gemm on NVIDIA H100" in svg  # FP32 NCHW panels are titled as before
    assert "tc_stand_in in BF16 NHWC on NVIDIA H100" in svg
    assert "BF16 tensor peak 700,000 GFlop/s" in svg
    roof = plot_roofline(store, tmp_path / "roof")[1].read_text()
    assert "Roofline on NVIDIA H100 in FP32" in roof and "in BF16" in roof
    only = plot_roofline(store, tmp_path / "roof_bf16", Scope(dtype="bf16"))[1].read_text()
    assert "BF16 tensor peak" in only and "FMA peak" not in only and "SGEMM" not in only
    speedup = plot_speedup(store, tmp_path / "speedup", Scope(dtype="bf16"))[1].read_text()
    assert "geometric mean 0.50x" in speedup


def test_report_has_a_section_per_dtype_present_and_fp32_sections_stay_fp32(
    store, tmp_path
) -> None:
    path = write_report(store, tmp_path / "out")
    text = path.read_text()
    head, _, bf16 = text.partition("## BF16: best per layer beside cuDNN in BF16")
    assert bf16, "no BF16 section"
    assert "## TF32" not in text and "## FP16" not in text  # only dtypes present
    fp32_best = head.partition("## Best configuration per shape")[2].partition("\n## ")[0]
    assert all(p.key in fp32_best for p in LAYERS)
    assert not any(p.key in fp32_best for p in BF16)
    section = bf16.partition("\n## ")[0]
    assert 0 < section.index("alexnet conv2") < section.index("alexnet conv3")  # layer order
    assert "% BF16 peak" in section and "cuDNN % BF16 peak" in section
    assert "geometric mean 0.50x cuDNN over 2 with a baseline" in section
    assert "at most 0.005" in section
    assert (tmp_path / "out" / "report" / "roofline_bf16.png").is_file()
    assert (tmp_path / "out" / "report" / "speedup_bf16.svg").is_file()
    assert "report/roofline_bf16.png" in section


def test_an_fp32_store_gets_no_dtype_sections(tmp_path) -> None:
    s = Store(tmp_path / "fp32.db")
    device_id = s.register_device(H100)
    run_id = s.start_run(device_id, "autotune run", {})
    m = Measurement.from_samples([1.0])
    s.record(run_id, device_id, "implicit_gemm", LAYERS[0], Config.of({"T": 1}), m, 1)
    text = write_report(s, tmp_path / "out").read_text()
    assert "best per layer beside cuDNN in" not in text
    s.close()


def test_best_and_plot_take_a_dtype(store, tmp_path) -> None:
    from click.testing import CliRunner

    from autotune.cli.app import main

    url = str(tmp_path / "mixed.db")
    result = CliRunner().invoke(main, ["best", "--dtype", "bf16", "--storage", url])
    assert result.exit_code == 0, result.output
    assert all(p.key in result.output for p in BF16)
    assert not any(f"| {p.key} " in result.output for p in LAYERS)
    stem = tmp_path / "plots" / "roof"
    args = ["plot", "--kind", "roofline", "--dtype", "BF16", "--output", str(stem)]
    result = CliRunner().invoke(main, [*args, "--storage", url])
    assert result.exit_code == 0, result.output
    assert "BF16 tensor peak" in stem.with_suffix(".svg").read_text()
    result = CliRunner().invoke(main, ["best", "--dtype", "int8", "--storage", url])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "autotune: unknown dtype 'int8' (known: fp32, tf32, bf16, fp16)"
    )


def test_a_familys_roofline_shows_the_libraries_only_in_its_dtypes(store, tmp_path) -> None:
    roof = plot_roofline(store, tmp_path / "roof", Scope(family="implicit_gemm"))[1].read_text()
    assert "in FP32" not in roof and "Roofline on NVIDIA H100" in roof  # one panel: FP32 alone
    assert "BF16" not in roof and "implicit_gemm" in roof
    tc = plot_roofline(store, tmp_path / "tc", Scope(family="tc_stand_in"))[1].read_text()
    assert "in BF16" in tc and "FMA peak" not in tc
    with pytest.raises(ReportError, match="family 'sgemm' and dtype bf16"):
        plot_roofline(store, tmp_path / "none", Scope(family="sgemm", dtype="bf16"))


def test_a_result_past_the_stored_peak_says_that_peak_is_not_one(tmp_path) -> None:
    s = Store(tmp_path / "low_peak.db")
    fill(s, tc_peak=False)
    device_id = s.register_device(H100)
    # A tensor-core ceiling below what the BF16 layers reached (a throttled library GEMM).
    s.record_ceiling(device_id, "tc_peak_bf16", 1_000.0, "GFlop/s", "BF16 GEMM")
    bf16 = write_report(s, tmp_path / "out").read_text().partition("## BF16")[2]
    assert "past the stored peak, which is then not the units' peak" in bf16
    s.close()
    normal = Store(tmp_path / "normal.db")
    fill(normal)
    assert "past the stored peak" not in write_report(normal, tmp_path / "n").read_text()
    normal.close()


def test_the_reports_tables_show_energy_and_throttling_where_they_were_observed(tmp_path) -> None:
    # `--observe energy,clocks`: each best's joules a run beside cuDNN's, and which ran held
    # down. A store without readings (the fixture's) has neither column.
    with Store(tmp_path / "observed.db") as s:
        device_id = s.register_device(H100)
        run_id = s.start_run(device_id, "autotune run --observe energy,clocks", {})
        s.record_ceiling(device_id, "fma_peak", FMA_PEAK, "GFlop/s", "FMA chains")
        s.record_ceiling(device_id, "tc_peak_bf16", TC_BF16, "GFlop/s", "BF16 GEMM")
        for problem in [LAYERS[0], BF16[0]]:
            dtype, family = problem.dtype, "tc_stand_in" if problem.dtype == "bf16" else "im2col"
            readings = (("energy_j", 0.125), ("throttled", 1.0 if dtype == "bf16" else 0.0))
            m = Measurement.from_samples([OURS[dtype]], observations=readings)
            s.record(run_id, device_id, family, problem, Config.of({"T": 1}), m, problem.flops)
            base = Measurement.from_samples([CUDNN[dtype]], observations=(("energy_j", 0.5),))
            s.record_baseline(device_id, "cudnn", problem, "ALGO", "9.19", base, problem.flops)
        text = write_report(s, tmp_path / "out").read_text()
    fp32, _, bf16 = text.partition("## BF16: best per layer beside cuDNN in BF16")
    fp32 = fp32.partition("## Best configuration per shape")[2].partition("\n## ")[0]
    bf16 = bf16.partition("\n## ")[0]
    for section in (fp32, bf16):
        header = next(line for line in section.splitlines() if "| time_ms" in line)
        assert "| J a run | cuDNN J a run |" in header
        assert "0.125" in section and "0.5" in section
    assert "throttled" in bf16 and "yes" in bf16  # its best ran held down
    assert "throttled" not in fp32  # no best there did
    with Store(tmp_path / "plain.db") as s:
        fill(s)
        plain = write_report(s, tmp_path / "plain").read_text()
    assert "J a run" not in plain and "| throttled" not in plain
