"""Issue 36's tables per dtype: each distinct convolution of AlexNet, OverFeat, VGG-16 and
ResNet-50 in NHWC, the best tensor-core family's stored best beside cuDNN in the same dtype and
layout (both measured under timing protocol 2), and the issue's targets checked: every layer
with C > 3 at least 1.0x cuDNN, the geometric mean at least 1.15x, the best layer at least 90%
of the dtype's measured tensor-core peak. Reads a results database, measures nothing, and, as
`autotune best` does, counts only evaluations of the kernels as they are now (tc_wgmma's
committed H100 results are of an older kernel and are left out); ours is a configuration's
figure, the median of its measurements (a confirmed best stands on three). From the checkout
root:
    python3 results/tc_targets.py STORAGE [DEVICE] > tables.md"""

import math
import sys

from autotune.families import FAMILIES, kernel_digests
from autotune.model.shapes import named_shapes
from autotune.reports import best_table
from autotune.store import Store

SETS = ("alexnet", "overfeat", "vgg16", "resnet50")
DTYPES = ("tf32", "bf16", "fp16")
FAMILIES_TC = ("tc_wgmma", "tc_implicit_gemm")
LAYER_TARGET, GEOMEAN_TARGET, PEAK_TARGET = 1.0, 1.15, 0.90


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def layers(dtype: str) -> dict[str, tuple[str, int]]:
    """Each distinct layer's key in `dtype` and NHWC, with the first set that has it and C."""
    found: dict[str, tuple[str, int]] = {}
    for name in SETS:
        for p in named_shapes(name):
            p = p.__class__(**{**p.as_dict(), "dtype": dtype, "layout": "NHWC"})
            found.setdefault(p.key, (name, p.C))
    return found


def table(store: Store, device: str | None, dtype: str) -> list[str]:
    df = best_table(store, device=device, kind="conv2d", dtype=dtype)
    df = df[df["family"].isin(FAMILIES_TC)]
    wanted = layers(dtype)
    out = [
        f"## {dtype}\n",
        "| set | layer | family | ours ms | measurements | cuDNN ms | speedup | % of peak |",
        "|---|---|---|--:|--:|--:|--:|--:|",
    ]
    speedups, wide, best_eff, missing = [], [], 0.0, 0
    for key, (set_name, c) in wanted.items():
        rows = df[df["shape"] == key]
        if not len(rows):
            missing += 1
            continue
        row = rows.loc[rows["time_ms"].astype(float).idxmin()]
        s, eff = float(row["speedup"]), float(row["efficiency"])
        base = float(row["time_ms"]) * s  # speedup: cuDNN's time over ours
        if math.isfinite(s):
            speedups.append(s)
            if c > 3:
                wide.append(s)
        if math.isfinite(eff):
            best_eff = max(best_eff, eff)
        out.append(
            f"| {set_name} | {key.split(',dtype=')[0]} | {row['family']} | {row['time_ms']} | "
            f"{row['measurements']} | {'' if base != base else f'{base:.4g}'} | {s:.2f} | "
            f"{100 * eff:.1f} |"
        )
    met = sum(s >= LAYER_TARGET for s in wide)
    stored = f"{len(wanted) - missing} of {len(wanted)} distinct layers stored in {dtype}"
    peak = f"best layer {100 * best_eff:.1f}% of the {dtype} peak (target {PEAK_TARGET:.0%})"
    if best_eff > 1:
        # Only cuBLAS's GEMM can be passed: the peak off sm_90, or stored before the wgmma loop.
        peak += ", past the stored peak (a cuBLAS GEMM's rate), so that target is not tested"
    if not speedups:
        out += ["", f"{stored}; none has cuDNN's time stored (`autotune baseline`); {peak}.\n"]
        return out
    out += [
        "",
        f"{stored}; with C > 3: {met} of {len(wide)} at least {LAYER_TARGET}x cuDNN (target: "
        f"all); geometric mean {geomean(speedups):.3f}x over {len(speedups)} (target "
        f"{GEOMEAN_TARGET}x), {geomean(wide):.3f}x over those with C > 3; {peak}.\n",
    ]
    return out


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python3 results/tc_targets.py STORAGE [DEVICE]")
    store = Store(sys.argv[1])
    store.read_current(kernel_digests(FAMILIES))
    device = sys.argv[2] if len(sys.argv) == 3 else None
    print("# Issue 36's targets per dtype: the tensor-core families beside cuDNN\n")
    print(f"Made by `python3 results/tc_targets.py {' '.join(sys.argv[1:])}` (NHWC, protocol 2).\n")
    for dtype in DTYPES:
        print("\n".join(table(store, device, dtype)))


if __name__ == "__main__":
    main()
