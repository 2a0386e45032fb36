"""Tables, plots and REPORT.md, read from the results database only.

Other packages import from here, never from the modules inside, so the reports' inside can
change without touching them."""

import importlib

from autotune.reports.activity import claims_status, format_status, run_status, runs_since
from autotune.reports.tables import best_table, chen_table1, format_table, maxdnn_table1
from autotune.reports.views import ReportError, Scope

# The plots and REPORT.md (which draws them) load matplotlib, about a second of imports and
# extension modules: only when first asked for. Every command imports this package (ReportError,
# the tables), and a Ctrl-C or SIGTERM that lands inside an extension module's start-up ends the
# process with a crash instead of a clean stop.
_LAZY = {
    "plot_gflops": "autotune.reports.plots",
    "plot_roofline": "autotune.reports.plots",
    "plot_speedup": "autotune.reports.plots",
    "write_report": "autotune.reports.markdown",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ReportError",
    "Scope",
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
