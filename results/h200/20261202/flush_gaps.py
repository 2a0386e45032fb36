"""Where a protocol-2 sample's time goes, from an Nsight Systems trace of the samples (`nsys
profile -t cuda`, then `nsys stats -r cuda_gpu_trace -f csv`): for every flush (a memset of
200 MB or more), the kernels that follow it back to back (each starting within 5 us of the
last one's end) are the sample's run. Prints, for each stretch of samples running the same
kernels, how many there were, the median gap from the flush's end to the first kernel's
start, the median of the kernels' span (first start to last end) and of their summed
durations, the grid and the first kernel's name.

    python3 flush_gaps.py TRACE_cuda_gpu_trace.csv > gaps.md
"""

from __future__ import annotations

import csv
import statistics
import sys

FLUSH_BYTES = 200e6  # the flush is 256 MiB or more; nsys rounds its size in MB
BACK_TO_BACK_NS = 5_000


def column(header: list[str], prefix: str) -> int:
    return next(i for i, h in enumerate(header) if h.startswith(prefix))


def rows(path: str):
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        start, dur = column(header, "Start"), column(header, "Duration")
        name, size = column(header, "Name"), column(header, "Bytes")
        grid = [column(header, g) for g in ("GrdX", "GrdY", "GrdZ")]
        for r in reader:
            mb = float(r[size]) if r[size] else 0.0
            unit = 1 if "(MB)" not in header[size] else 1e6  # nsys reports MB or bytes
            yield (
                int(float(r[start])),
                int(float(r[dur])),
                r[name],
                "x".join(r[g] or "-" for g in grid),
                mb * unit,
            )


def samples(path: str):
    """(gap ns, span ns, summed ns, grid, name) of every flushed sample, in order."""
    trace = sorted(rows(path))
    for i, (start, dur, name, _, nbytes) in enumerate(trace):
        if "memset" not in name.lower() or nbytes < FLUSH_BYTES:
            continue
        end, run = start + dur, []
        for k_start, k_dur, k_name, k_grid, _ in trace[i + 1 :]:
            if "memset" in k_name.lower() or "memcpy" in k_name.lower():
                break
            last = run[-1][0] + run[-1][1] if run else end
            if k_start - last > BACK_TO_BACK_NS and run:
                break
            run.append((k_start, k_dur, k_name, k_grid))
        if run:
            span = run[-1][0] + run[-1][1] - run[0][0]
            yield run[0][0] - end, span, sum(r[1] for r in run), run[0][3], run[0][2]


def main() -> None:
    print(
        "| samples | gap after flush us | span us | kernels us | grid | first kernel |\n"
        "|--:|--:|--:|--:|---|---|"
    )
    stretch: list[tuple] = []

    def flush_stretch() -> None:
        if stretch:
            gaps, spans, sums = zip(*[(s[0], s[1], s[2]) for s in stretch], strict=True)
            med = lambda v: statistics.median(v) / 1000  # noqa: E731
            grid, name = stretch[0][3], stretch[0][4][:60]
            print(
                f"| {len(stretch)} | {med(gaps):.2f} | {med(spans):.2f} | {med(sums):.2f} | "
                f"{grid} | {name} |"
            )
            stretch.clear()

    for s in samples(sys.argv[1]):
        if stretch and (s[3], s[4]) != (stretch[0][3], stretch[0][4]):
            flush_stretch()
        stretch.append(s)
    flush_stretch()


if __name__ == "__main__":
    main()
