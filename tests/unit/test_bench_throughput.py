"""`autotune bench throughput` without a GPU: its table and its refusal without Kernel Tuner."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from autotune.bench import bench
from autotune.bench.throughput import markdown

RESULTS = {
    "device": "NVIDIA H100 80GB HBM3",
    "5x5": {
        "autotune": {"evals": 30, "wall_s": 4.26, "evals_per_min": 422.22, "best_gflops": 9494.5,
                     "gpu_busy": 0.667},
        "kernel_tuner": {"evals": 30, "wall_s": 20.32, "evals_per_min": 88.59,
                         "best_gflops": 7812.5},
    },
}  # fmt: skip


def test_markdown_table_has_both_tuners_and_the_speedup() -> None:
    text = markdown(RESULTS)
    assert "| 5x5 | autotune | 30 | 4.3 | 422.2 | 9,494 | 4.8x |" in text
    assert "| 5x5 | Kernel Tuner | 30 | 20.3 | 88.6 | 7,812 |  |" in text
    assert "17x17" not in text and "5x5: 67%" in text


@pytest.mark.skipif(
    importlib.util.find_spec("kernel_tuner") is not None, reason="Kernel Tuner is installed"
)
def test_without_kernel_tuner_one_line_error(tmp_path) -> None:
    result = CliRunner().invoke(bench, ["throughput", "--output-dir", str(tmp_path)])
    assert result.exit_code != 0
    assert "Kernel Tuner is not installed" in result.output
    assert not list(tmp_path.iterdir())
