"""A reading, not a measurement: issue 36's table (tc_targets.py's Markdown) with timing
protocol 2's floor (timer_floor.md: 4.3 us a sample on the H200, an empty kernel's) taken off
both sides of every layer, to show how much a sample's fixed part moves the ratios of the
short layers. From the checkout root:
    python3 results/h200/20261130h/floor_reading.py TABLES.md 0.0043"""

import math
import sys


def main(path: str, floor_ms: float) -> None:
    dtype, rows = None, {}
    for line in open(path):
        if line.startswith("## "):
            dtype = line[3:].strip()
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if dtype and len(cells) == 7 and cells[3][:1].isdigit():
            c = int(cells[1].split("C=")[1].split(",")[0])
            rows.setdefault(dtype, []).append((c, float(cells[3]), float(cells[4])))
    print(
        "| dtype | C > 3 layers at least 1.0x, as measured | net of the floor "
        "| geometric mean C > 3, as measured | net of the floor |"
    )
    print("|---|--:|--:|--:|--:|")
    for dtype, layers in rows.items():
        wide = [(ours, cudnn) for c, ours, cudnn in layers if c > 3]
        measured = [cudnn / ours for ours, cudnn in wide]
        net = [(cudnn - floor_ms) / (ours - floor_ms) for ours, cudnn in wide]

        def geomean(values):
            return math.exp(sum(math.log(v) for v in values) / len(values))

        print(
            f"| {dtype} | {sum(s >= 1.0 for s in measured)} of {len(wide)} | "
            f"{sum(s >= 1.0 for s in net)} of {len(wide)} | {geomean(measured):.3f} | "
            f"{geomean(net):.3f} |"
        )


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
