"""Each layer of both_sides.py's tables, ours and cuDNN (the median of each side's measurements),
as a share of its dtype's tensor-core peak measured in the same store (`autotune device
--remeasure --ceiling tc_peak_...`), the best of each side first. Session 67's peak_share.py
read rest_ab.py's tables; this one reads both_sides.py's summary rows.

    python3 peak_share.py STORE both_sides_bf16.md [both_sides_fp16.md ...] > peak.md
"""

import re
import sqlite3
import sys

from autotune.model.precision import PRECISIONS
from autotune.model.problem import ConvProblem

store, tables = sys.argv[1], sys.argv[2:]
peaks = dict(
    sqlite3.connect(store).execute(
        "select name, value from ceilings where id in (select max(id) from ceilings group by name)"
    )
)
print("| dtype | layer | ours ms | ours % of peak | cuDNN ms | cuDNN % of peak |")
print("|---|---|--:|--:|--:|--:|")
for table in tables:
    dtype = re.search(r"both_sides_(\w+)\.md", table).group(1)
    peak = peaks[PRECISIONS[dtype].peak_ceiling] / 1e3  # TFLOP/s
    rows = []
    for line in open(table):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("N="):
            continue
        sizes = {k: int(v) for k, v in (kv.split("=") for kv in cells[0].split(","))}
        flops = ConvProblem(**sizes, dtype=dtype, layout="NHWC").flops
        ours, cudnn = float(cells[1]), float(cells[2])
        share = [100 * flops / (ms * 1e-3) / 1e12 / peak for ms in (ours, cudnn)]
        rows.append((share[0], cells[0], ours, cudnn, share[1]))
    for share, layer, ours, cudnn, cudnn_share in sorted(rows, reverse=True)[:3]:
        print(f"| {dtype} | {layer} | {ours:.4f} | {share:.1f} | {cudnn:.4f} | {cudnn_share:.1f} |")
    _, layer, _, cudnn, cudnn_share = max(rows, key=lambda r: r[4])
    print(f"| {dtype} | cuDNN's best: {layer} | | | {cudnn:.4f} | {cudnn_share:.1f} |")
