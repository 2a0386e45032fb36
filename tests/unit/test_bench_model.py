"""`autotune bench model` and `autotune tune-model` without a GPU: refused in one line, and the
bench's table and plot written from rows (no PyTorch needed for those)."""

from __future__ import annotations

import csv

from click.testing import CliRunner

from autotune.bench.model import COLUMNS, write_plot, write_table
from autotune.cli.app import main


def test_bench_model_is_refused_in_one_line_without_a_gpu(tmp_path):
    result = CliRunner().invoke(main, ["bench", "model", "--output", str(tmp_path)])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert "bench model needs" in line
    assert not list(tmp_path.iterdir())


def test_tune_model_is_refused_in_one_line_without_torchvision_or_a_gpu(tmp_path):
    storage = str(tmp_path / "m.db")
    args = ["tune-model", "--model", "resnet18", "--batch", "1", "--storage", storage]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    # One line of refusal (after "starting the GPU worker" where torchvision is there).
    line = result.output.strip().splitlines()[-1]
    assert "needs PyTorch and torchvision" in line or "no usable CUDA GPU" in line
    assert "Traceback" not in result.output


def test_the_table_and_plot_are_written_from_rows(tmp_path):
    rows = [
        dict(
            zip(
                COLUMNS,
                ("resnet50", 32, "bf16 channels-last", way, ms, host, "1e-3", "1.000", sp, plans),
                strict=True,
            )
        )
        for way, ms, host, sp, plans in (
            ("eager", "5.6", "4.1", "1.00", ""),
            ("ours", "4.0", "3.9", "1.40", "23/23"),
        )
    ]
    csv_path, md_path = write_table(rows, tmp_path)
    with csv_path.open() as f:
        assert [r["way"] for r in csv.DictReader(f)] == ["eager", "ours"]
    table = md_path.read_text().splitlines()
    assert table[0] == "| " + " | ".join(COLUMNS) + " |" and len(table) == 4
    assert "| ours | 4.0 | 3.9 |" in table[3] and table[3].endswith("| 23/23 |")
    assert write_plot(rows, tmp_path).stat().st_size > 1000
