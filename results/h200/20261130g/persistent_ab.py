"""Issue 36's A/B of the persistent grid (PERSISTENT, a launch tunable of tc_wgmma): on the bf16
layers where it could move the most, the best tc_wgmma configuration of session 54's table
(its final store, results/h200/20261130f/call4) as stored, with one tile a block, and with one
block a multiprocessor walking the tiles, all three timed in the same call.

Two modes, from the checkout root:
    python3 persistent_ab.py subspaces STORE.db DIR   # DIR/ab_<i>.toml and DIR/shapes.txt
    python3 persistent_ab.py table AB.db              # the A/B table (Markdown)
A subspace holds the stored best's values, TILES_PER_BLOCK as stored and 1, PERSISTENT 0 and 1:
the space's constraints leave those three (or two where one tile a block is not valid)."""

import json
import math
import sqlite3
import sys
from pathlib import Path

SMS = 132
# Where the stored best's tiles a block leave multiprocessors idle or a tile a block was best
# (392 tiles in 4s take 4 turns on 98 blocks, 3 on 131), plus the large VGG-16 layers.
LAYERS = (
    "N=14,K=1,C=256,F=1024,B=32", "N=14,K=1,C=512,F=1024,B=32,stride=2",
    "N=56,K=1,C=256,F=128,B=32", "N=56,K=1,C=256,F=64,B=32", "N=56,K=1,C=64,F=64,B=32",
    "N=12,K=3,C=256,F=512,B=128", "N=12,K=3,C=512,F=1024,B=128", "N=12,K=3,C=1024,F=1024,B=128",
    "N=13,K=3,C=256,F=256,B=128", "N=13,K=3,C=384,F=256,B=128", "N=13,K=3,C=192,F=384,B=128",
    "N=112,K=3,C=128,F=128,B=32", "N=56,K=3,C=256,F=256,B=32", "N=28,K=3,C=512,F=512,B=32",
)  # fmt: skip
SUFFIX = ",dtype=bf16,layout=NHWC"


def _digest(db) -> str:
    query = "select kernel_digest from evaluations where family = 'tc_wgmma' order by id desc"
    return db.execute(query + " limit 1").fetchone()[0]


def _best(db, key: str, digest: str) -> tuple[dict, float] | None:
    row = db.execute(
        "select config, time_ms from evaluations where family = 'tc_wgmma' and status = 'OK' "
        "and protocol = 2 and kernel_digest = ? and problem_key = ? order by time_ms limit 1",
        (digest, key),
    ).fetchone()
    return (json.loads(row[0]), row[1]) if row else None


def subspaces(store: str, directory: str) -> None:
    db, out = sqlite3.connect(store), Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    digest, lines = _digest(db), []
    for i, layer in enumerate(LAYERS):
        found = _best(db, layer + SUFFIX, digest)
        if found is None:
            print(f"{layer}: no stored best", file=sys.stderr)
            continue
        config, time_ms = found
        values = {k: [v] for k, v in config.items()}
        values["TILES_PER_BLOCK"] = sorted({config["TILES_PER_BLOCK"], 1})
        values["PERSISTENT"] = [0, 1]
        text = [
            f'description = "The persistent grid A/B on {layer} bf16: session 54\'s best '
            f'({time_ms:.4f} ms) with its tiles a block, one, and one block a multiprocessor"',
            "[tc_wgmma]",
            *(f"{k} = {json.dumps(v)}" for k, v in values.items()),
        ]
        (out / f"ab_{i}.toml").write_text("\n".join(text) + "\n")
        lines.append(f"{i} {layer}{SUFFIX}")
    (out / "shapes.txt").write_text("\n".join(lines) + "\n")


def _tiles(key: str, config: dict) -> int:
    d = dict(kv.split("=") for kv in key.split(","))
    pixels = int(d["B"]) * int(d["N"]) ** 2
    return math.ceil(pixels / config["BM"]) * math.ceil(int(d["F"]) / config["BN"])


def table(ab: str) -> None:
    db = sqlite3.connect(ab)
    digest = _digest(db)
    print("| layer | tile | tiles | as stored: tiles a block, ms | one a block, ms | "
          "persistent, ms | persistent / as stored |")  # fmt: skip
    print("|---|---|--:|--:|--:|--:|--:|")
    ratios = []
    for layer in LAYERS:
        rows = db.execute(
            "select config, time_ms from evaluations where family = 'tc_wgmma' and status = 'OK' "
            "and protocol = 2 and kernel_digest = ? and problem_key = ?",
            (digest, layer + SUFFIX),
        ).fetchall()
        if not rows:
            continue
        by = {}
        for config, time_ms in rows:
            c = json.loads(config)
            by[(c["TILES_PER_BLOCK"], c.get("PERSISTENT", 0))] = (c, time_ms)
        stored = next((v for (t, p), v in by.items() if p == 0 and t > 1), by.get((1, 0)))
        one, persistent = by.get((1, 0)), by.get((1, 1))
        if stored is None or persistent is None:
            continue
        c = stored[0]
        ratio = persistent[1] / stored[1]
        ratios.append(ratio)
        cell = f"{one[1]:.4f}" if one else "not valid"
        print(
            f"| {layer} | {c['BM']}x{c['BN']} WG{c['WG']} PP{c.get('PINGPONG', 0)} | "
            f"{_tiles(layer, c)} | {c['TILES_PER_BLOCK']}: {stored[1]:.4f} | {cell} | "
            f"{persistent[1]:.4f} | {ratio:.3f} |"
        )
    if ratios:
        mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        faster = sum(r < 1 for r in ratios)
        print(f"\nPersistent faster on {faster} of {len(ratios)} layers; geometric mean {mean:.3f}.")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "subspaces" and len(sys.argv) == 4:
        subspaces(sys.argv[2], sys.argv[3])
    elif mode == "table" and len(sys.argv) == 3:
        table(sys.argv[2])
    else:
        sys.exit(__doc__)
