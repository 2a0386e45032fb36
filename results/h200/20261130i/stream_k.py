"""Stream-K beside the whole tiles, per weak layer: the fastest STREAM_K = 1 configuration of
each kernel version (call 1's code, call 2's), the fastest of the rest with call 2's code (its
stored bests re-timed and the searches'), and their ratio. Run as:
    python3 results/h200/20261130i/stream_k.py STORE CALL1_DIGEST CALL2_DIGEST
over the merged store of the session's calls (sqlite3, protocol 2, NHWC)."""

from __future__ import annotations

import sqlite3
import sys


def main() -> None:
    store, old, new = sys.argv[1:4]
    db = sqlite3.connect(store)
    rows = db.execute(
        """
        select problem_key, kernel_digest, coalesce(json_extract(config, '$.STREAM_K'), 0) as sk,
               min(time_ms)
        from evaluations
        where family = 'tc_wgmma' and status = 'OK' and protocol = 2
              and kernel_digest in (?, ?)
        group by problem_key, kernel_digest, sk
        """,
        (old, new),
    ).fetchall()
    best: dict[str, dict[tuple[str, int], float]] = {}
    for key, digest, sk, ms in rows:
        best.setdefault(key, {})[(digest, int(sk))] = ms
    print("| layer | stream-K, call 1's code (us) | stream-K, call 2's code (us) | whole tiles, call 2's code (us) | stream-K / whole tiles |")
    print("|---|--:|--:|--:|--:|")
    ratios = []
    for key in sorted(best, key=lambda k: (k.split("dtype=")[1], k)):
        b = best[key]
        if (new, 1) not in b or (new, 0) not in b:
            continue
        ratio = b[(new, 1)] / b[(new, 0)]
        ratios.append(ratio)
        old_us = f"{1e3 * b[(old, 1)]:.2f}" if (old, 1) in b else ""
        print(f"| {key.replace(',layout=NHWC', '')} | {old_us} | {1e3 * b[(new, 1)]:.2f} | {1e3 * b[(new, 0)]:.2f} | {ratio:.3f} |")
    wins = sum(r < 1.0 for r in ratios)
    print(f"\n{len(ratios)} layers; stream-K faster on {wins}.")


if __name__ == "__main__":
    main()
