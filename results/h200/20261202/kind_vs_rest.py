"""Per layer and dtype, the fastest configuration of one kind (--kind NAME=VALUE, e.g.
MULTICAST_BLOCKS=4) against the fastest other one, both measured with this call's code
(evaluations stored since --since); session 68's split_vs_rest.py for any tunable:

    python3 kind_vs_rest.py DB --kind MULTICAST_BLOCKS=4 --since "YYYY-MM-DD HH:MM:SS"
"""

import argparse
import json
import sqlite3

SHOWN = ("SPLIT_K", "STORE_TMA", "GEMM_1X1", "PINGPONG", "PERSISTENT", "MULTICAST")


def short(c: dict) -> str:
    s = f"{c['BM']}x{c['BN']} WG{c['WG']} S{c['STAGES']}"
    for name in SHOWN:
        if int(c.get(name, 0)):
            s += f" {name.lower()}" + (f"={c[name]}" if name in ("SPLIT_K", "MULTICAST") else "")
    if int(c.get("MULTICAST", 0)):
        s += f"x{c.get('MULTICAST_BLOCKS', 2)}"
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--kind", required=True, help="NAME=VALUE")
    ap.add_argument("--since", required=True)
    args = ap.parse_args()
    name, value = args.kind.split("=")
    rows = sqlite3.connect(args.db).execute(
        "select problem_key, config, time_ms from evaluations where family = 'tc_wgmma' "
        "and status = 'OK' and protocol = 2 and created_at >= ?",
        (args.since,),
    )
    best: dict[tuple[str, bool], tuple[float, dict]] = {}
    for key, config, ms in rows:
        c = json.loads(config)
        kind = (key, str(c.get(name)) == value)
        if kind not in best or ms < best[kind][0]:
            best[kind] = (ms, c)
    print(f"| layer | best other, ms | config | best {args.kind}, ms | config | other / kind |")
    print("|---|--:|---|--:|---|--:|")
    for key in sorted({k for k, _ in best}):
        other, kind = best.get((key, False)), best.get((key, True))
        cells = [key.replace(",layout=NHWC", "")]
        for b in (other, kind):
            cells += [f"{b[0]:.4f}", short(b[1])] if b else ["", ""]
        cells.append(f"{other[0] / kind[0]:.3f}" if other and kind else "")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
