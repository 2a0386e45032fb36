"""The issue's peak target measured independently: each layer of selection.py's tables as a share
of its dtype's tensor-core peak, measured on the same machine (`autotune device --remeasure
--ceiling tc_peak_...` into STORE), for the "min of 5" figure and the one measured again.

    python3 peak.py STORE selection_bf16.md [selection_fp16.md ...] > peak.md
"""

from __future__ import annotations

import re
import sqlite3
import sys

from autotune.model.precision import PRECISIONS
from autotune.model.problem import ConvProblem


def main() -> None:
    store, tables = sys.argv[1], sys.argv[2:]
    peaks = dict(
        sqlite3.connect(store).execute(
            "select name, value from ceilings where id in (select max(id) from ceilings"
            " group by name)"
        )
    )
    print("| dtype | layer | GFlop/s, min of 5 | GFlop/s, again | peak GFlop/s | % min | % again |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for table in tables:
        dtype = re.search(r"selection_(\w+)\.md", table).group(1)
        peak = peaks.get(PRECISIONS[dtype].peak_ceiling)
        for line in open(table):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 3 or not cells[0].startswith("N=") or not cells[1][:1].isdigit():
                continue
            fields = {k: int(v) for k, v in (kv.split("=") for kv in cells[0].split(","))}
            flops = ConvProblem(**fields, dtype=dtype, layout="NHWC").flops
            low, again = (flops / (float(ms) * 1e-3) / 1e9 for ms in cells[1:3])
            share = [f"{100 * g / peak:.1f}" if peak else "" for g in (low, again)]
            print(
                f"| {dtype} | {cells[0]} | {low:,.0f} | {again:,.0f} | "
                f"{peak or float('nan'):,.0f} | {share[0]} | {share[1]} |"
            )


if __name__ == "__main__":
    main()
