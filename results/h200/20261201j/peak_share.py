"""Each layer of rest_ab.py's tables, ours and cuDNN, as a share of its dtype's tensor-core peak
measured in the same store (`autotune device --remeasure --ceiling tc_peak_...`, call 6).

    python3 peak_share.py STORE call6/rest_ab_bf16.md [call6/rest_ab_fp16.md ...] > peak.md
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
print("| dtype | layer | side | ms | TFLOP/s | peak TFLOP/s | % of peak |")
print("|---|---|---|--:|--:|--:|--:|")
for table in tables:
    dtype = re.search(r"rest_ab_(\w+)\.md", table).group(1)
    peak = peaks[PRECISIONS[dtype].peak_ceiling] / 1e3
    for line in open(table):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[2] not in ("ours", "cuDNN"):
            continue
        sizes = {k: int(v) for k, v in (kv.split("=") for kv in cells[0].split(","))}
        flops = ConvProblem(**sizes, dtype=dtype, layout="NHWC").flops
        tflops = flops / float(cells[3]) / 1e9
        print(
            f"| {dtype} | {cells[0]} | {cells[2]} | {cells[3]} | {tflops:.1f} | {peak:.1f} "
            f"| {100 * tflops / peak:.1f} |"
        )
