"""Each measurement's samples from a sample_gaps.py trace, beside the both_sides table printed
with it: a marker memset (sample_gaps.MARKER_BYTES) follows each measurement, so the samples
between two markers are one row's. Prints, per layer, round and side: the
samples, the medians of the CUDA events' time (the table's), of the gap from the flush's end
to the first kernel's start and of the kernels' own time (CUPTI); then per layer each side's
median kernel time and their ratio.

    python3 sample_runs.py TRACE.csv SIDES.md > runs.md
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261202"))
from flush_gaps import BACK_TO_BACK_NS, FLUSH_BYTES, rows  # noqa: E402  (session 69's)

MARKER_BYTES = 12345  # sample_gaps.py queues a memset of this size after each measurement
FLUSH_KERNEL = "l2_flush_fill"  # sample_gaps.py --kernel-flush: the flush's own kernel


def runs(trace: str) -> list[list[tuple]]:
    """Each measurement's flushed samples, (gap ns, span ns, grid, name) each: the gap from the
    flush's end to the sample's first event, the span from there to its last event's end (the
    kernels that follow the flush back to back, and any memset of their own)."""
    events = sorted(rows(trace))
    out: list[list[tuple]] = [[]]
    for i, (start, dur, name, _, nbytes) in enumerate(events):
        memset = "memset" in name.lower()
        if memset and nbytes == MARKER_BYTES:
            out.append([])
            continue
        if not memset or nbytes < FLUSH_BYTES:
            continue
        run, end = [], start + dur
        for event in events[i + 1 :]:
            if event[4] == MARKER_BYTES or event[4] >= FLUSH_BYTES:  # kernels have no bytes
                break
            if event[2] == FLUSH_KERNEL and not run:  # the flush's kernel: the flush ends after it
                end = event[0] + event[1]
                continue
            last = run[-1][0] + run[-1][1] if run else end
            if run and event[0] - last > BACK_TO_BACK_NS:
                break
            run.append(event)
        if run:
            # named by its first kernel (a sample may begin with a memset of its own)
            named = next((r for r in run if "memset" not in r[2].lower()), run[0])
            span = run[-1][0] + run[-1][1] - run[0][0]
            out[-1].append((run[0][0] - end, span, named[3], named[2]))
    return out[:-1]  # the last marker closes the last measurement


def table_rows(sides_md: str) -> list[tuple[str, str, str, float]]:
    """(layer, round, side, ms) of the both_sides table's measurements, in order."""
    rows_ = []
    for line in Path(sides_md).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[2] in ("ours", "cuDNN"):
            rows_.append((cells[0], cells[1], cells[2], float(cells[3])))
    return rows_


def main() -> None:
    measured, listed = runs(sys.argv[1]), table_rows(sys.argv[2])
    if len(measured) != len(listed):
        sys.exit(f"sample_runs: {len(measured)} runs in the trace, {len(listed)} in the table")
    med = lambda v: statistics.median(v) / 1000  # noqa: E731  (ns -> us)
    print(
        "| layer | round | side | samples | events us | gap us | kernel us | grid | kernel |\n"
        "|---|--:|---|--:|--:|--:|--:|---|---|"
    )
    kernel: dict[str, dict[str, list[float]]] = {}
    for (layer, rnd, side, ms), run in zip(listed, measured, strict=True):
        k = med([s[1] for s in run])
        kernel.setdefault(layer, {}).setdefault(side, []).append(k)
        print(
            f"| {layer} | {rnd} | {side} | {len(run)} | {ms * 1000:.2f} | "
            f"{med([s[0] for s in run]):.2f} | {k:.2f} | {run[0][2]} | {run[0][3][:40]} |"
        )
    print("\n| layer | ours kernel us | cuDNN kernel us | cuDNN / ours |\n|---|--:|--:|--:|")
    for layer, sides in kernel.items():
        o, c = statistics.median(sides["ours"]), statistics.median(sides["cuDNN"])
        print(f"| {layer} | {o:.2f} | {c:.2f} | {c / o:.3f} |")


if __name__ == "__main__":
    main()
