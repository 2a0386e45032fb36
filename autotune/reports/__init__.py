"""Tables, plots and REPORT.md, read from the results database only.

Other packages import from here, never from the modules inside, so the reports' inside can
change without touching them."""

from autotune.reports.activity import claims_status, format_status, run_status, runs_since
from autotune.reports.markdown import write_report
from autotune.reports.plots import plot_gflops, plot_roofline, plot_speedup
from autotune.reports.tables import best_table, chen_table1, format_table, maxdnn_table1
from autotune.reports.views import ReportError

__all__ = [
    "ReportError",
    "best_table",
    "chen_table1",
    "claims_status",
    "format_status",
    "format_table",
    "maxdnn_table1",
    "plot_gflops",
    "plot_roofline",
    "plot_speedup",
    "run_status",
    "runs_since",
    "write_report",
]
