"""How full the last wave of tc_wgmma's grid can be on each distinct layer of AlexNet, OverFeat,
VGG-16 and ResNet-50 (C > 3): arithmetic on the tile counts, not a measurement. It bounds what a
persistent schedule with stream-K (issue 36, item 1) can add over the tile shapes and SPLIT_K
that tc_wgmma's space already has: a grid of T blocks of one block per multiprocessor runs
ceil(T / SMS) waves, so a share 1 - T / (ceil(T / SMS) * SMS) of the machine idles through the
last one, which stream-K's fractional split would fill. From the checkout root:
    python3 results/bench/wave_fill.py > results/bench/wave_fill.md"""

import math

from autotune.model.shapes import named_shapes

SMS = 132  # H100 SXM and H200
TILES = ((128, 128), (128, 256), (256, 128))  # the large tiles the fast configurations use
SPLITS = (1, 2, 4, 8)  # as the space has them, under its two rules (`allowed`)
ELEM_BYTES = 2  # bf16 and fp16


def allowed(p, blocks: int, split: int) -> bool:
    """tc_wgmma's SPLIT_K rules (search_spaces/tc_wgmma.toml): at most two blocks a
    multiprocessor in all, and at least four 128-byte steps of the reduction a split."""
    return split == 1 or (
        blocks * split <= 2 * SMS and split * 4 * 128 <= p.C * p.K**2 * ELEM_BYTES
    )


def fill(blocks: int) -> float:
    return blocks / (math.ceil(blocks / SMS) * SMS)


def main() -> None:
    print("# The last wave's fill of tc_wgmma's grid, per layer (arithmetic, not measured)\n")
    print(
        f"One block a multiprocessor, {SMS} multiprocessors; the tiles {TILES}; `fill` the best "
        "over the tiles alone, `with SPLIT_K` the best over the tiles and the splits the space "
        "allows in bf16 (a split multiplies the blocks; its reduction pass is not counted). "
        "`idle` is what stays idle with SPLIT_K: the most a stream-K schedule could win back "
        "on the layer, as a share of its time.\n"
    )
    print("| set | layer | M = B*N*N | F | fill | with SPLIT_K | tile, split | idle |")
    print("|---|---|--:|--:|--:|--:|---|--:|")
    seen, idle = set(), []
    for name in ("alexnet", "overfeat", "vgg16", "resnet50"):
        for p in named_shapes(name):
            if p.key in seen or p.C <= 3:
                continue
            seen.add(p.key)
            m = p.B * p.N * p.N
            counts = {(bm, bn): math.ceil(m / bm) * math.ceil(p.F / bn) for bm, bn in TILES}
            plain = max(fill(t) for t in counts.values())
            best, _, tile, split = max(
                (fill(t * s), -s, tile, s)
                for tile, t in counts.items()
                for s in SPLITS
                if allowed(p, t, s)
            )
            idle.append(1 - best)
            print(
                f"| {name} | {p.key} | {m} | {p.F} | {plain:.2f} | {best:.2f} | "
                f"{tile[0]}x{tile[1]}, {split} | {1 - best:.0%} |"
            )
    over = sum(i > 0.05 for i in idle)
    print(
        f"\n{len(idle)} layers; {over} leave more than 5% of the machine idle with the tiles and "
        f"SPLIT_K the space has (the most {max(idle):.0%}); the median leaves "
        f"{sorted(idle)[len(idle) // 2]:.0%}."
    )


if __name__ == "__main__":
    main()
