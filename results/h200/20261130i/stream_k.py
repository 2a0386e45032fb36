"""Stream-K beside the whole tiles, per layer: the fastest STREAM_K = 1 configuration of two
kernel versions (OLD, NEW: kernel digests), the fastest of the rest with the NEW code (its
stored bests re-timed and the searches'), and their ratio. Run as:
    python3 results/h200/20261130i/stream_k.py STORE OLD_DIGEST NEW_DIGEST
over a store of the session's calls (sqlite3, protocol 2, NHWC): calls 1-3 merged with call 1's
and call 2's digests gives stream_k.md; call 6's store with call 2's and call 6's, stream_k_6.md."""

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
    print(
        f"| layer | stream-K, code {old[:7]} (us) | stream-K, code {new[:7]} (us) "
        f"| whole tiles, code {new[:7]} (us) | stream-K / whole tiles |"
    )
    print("|---|--:|--:|--:|--:|")
    ratios = []
    for key in sorted(best, key=lambda k: (k.split("dtype=")[1], k)):
        b = best[key]
        if (new, 1) not in b or (new, 0) not in b:
            continue
        ratio = b[(new, 1)] / b[(new, 0)]
        ratios.append(ratio)
        old_us = f"{1e3 * b[(old, 1)]:.2f}" if (old, 1) in b else ""
        layer = key.replace(",layout=NHWC", "")
        times = f"{1e3 * b[(new, 1)]:.2f} | {1e3 * b[(new, 0)]:.2f}"
        print(f"| {layer} | {old_us} | {times} | {ratio:.3f} |")
    wins = sum(r < 1.0 for r in ratios)
    print(f"\n{len(ratios)} layers; stream-K faster on {wins}.")


if __name__ == "__main__":
    main()
