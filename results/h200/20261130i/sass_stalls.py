"""The stall samples of call 5's two Nsight Compute profiles by category and by SASS instruction
(the 12 with the most samples), from the CSVs in call5/ncu_sass.tgz. Run as:
    python3 results/h200/20261130i/sass_stalls.py results/h200/20261130i/call5/ncu_sass.tgz"""

from __future__ import annotations

import csv
import io
import sys
import tarfile


def summary(name: str, text: str) -> None:
    rows = list(csv.reader(io.StringIO(text)))
    header, data = rows[1], [r for r in rows[2:] if len(r) == len(rows[1])]
    samples = header.index("Warp Stall Sampling (All Samples)")
    source = header.index("Source")
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    count = [(float(r[samples] or 0), r[source].strip()) for r in data]
    total = sum(n for n, _ in count)
    by_reason = {h: sum(float(r[header.index(h)] or 0) for r in data) for h in reasons}
    print(f"## {name}: {total:.0f} warp samples\n")
    print("| stall reason | % of samples |\n|---|--:|")
    for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1])[:8]:
        print(f"| {reason} | {100 * n / total:.1f} |")
    print("\n| % of samples | SASS |\n|--:|---|")
    for n, text in sorted(count, reverse=True)[:12]:
        print(f"| {100 * n / total:.1f} | `{text}` |")
    print()


def main() -> None:
    with tarfile.open(sys.argv[1]) as tar:
        for member in sorted(tar.getnames()):
            summary(member, tar.extractfile(member).read().decode())


if __name__ == "__main__":
    main()
