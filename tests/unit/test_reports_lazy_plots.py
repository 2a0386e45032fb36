"""The reports package loads matplotlib only when a plot or REPORT.md is asked for: every command
imports the package, and a stop signal inside matplotlib's extension modules' start-up crashed
the process instead of stopping it (tests/system/test_interrupt.py saw exit -2 and -6)."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_tables_and_errors_come_without_matplotlib() -> None:
    code = (
        "import sys\n"
        "from autotune.reports import ReportError, best_table, format_table\n"
        "import autotune.cli.app\n"
        "print('matplotlib' in sys.modules)\n"
    )
    assert _run(code) == "False"


def test_the_plots_and_the_report_load_it_when_asked_for() -> None:
    code = (
        "import sys\n"
        "import autotune.reports as reports\n"
        "from autotune.reports import plot_gflops, write_report\n"
        "print('matplotlib' in sys.modules, plot_gflops.__module__, write_report.__module__,\n"
        "      reports.plot_speedup.__name__, hasattr(reports, 'no_such_view'))\n"
    )
    assert _run(code) == (
        "True autotune.reports.plots autotune.reports.markdown plot_speedup False"
    )
