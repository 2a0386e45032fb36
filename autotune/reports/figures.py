"""The plots REPORT.md shows: where their files go and the Markdown that embeds them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from autotune.reports.views import ReportError, Scope
from autotune.store import Store

IMAGE_DIR = "report"  # beside REPORT.md, referenced with relative paths

# A plot function of reports.plots: (store, path stem, scope) -> [png, svg].
Plot = Callable[..., list[Path]]


def embedded(
    store: Store,
    out_dir: Path,
    plots: Iterable[tuple[str, Plot, str]],
    device: str | None,
    dtype: str,
) -> list[str]:
    """Per (title, plot, file stem): a heading and the plot's PNG with a link to its SVG, or
    why it was not plotted (nothing stored to draw is a line of the report, not an error)."""
    parts = []
    for title, plot, stem in plots:
        parts.append(f"### {title}\n")
        try:
            paths = plot(store, out_dir / IMAGE_DIR / stem, Scope(device=device, dtype=dtype))
        except ReportError as err:
            parts.append(f"Not plotted: {err}.\n")
            continue
        png, svg = (p.relative_to(out_dir).as_posix() for p in paths)
        parts.append(f"![{title}]({png})\n\n[SVG]({svg})\n")
    return parts
