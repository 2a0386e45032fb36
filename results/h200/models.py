"""Issue 35's end-to-end table: the latest `autotune bench model` run of each model and precision
on the H200 (batch 32, every convolution tuned on its own shape), one row each, read from the
runs' model.csv files and checked against the issue's targets. From the checkout root:
    python3 results/h200/models.py > results/h200/models.md"""

import csv
from pathlib import Path

HERE = Path(__file__).parent
FP32 = "--family implicit_gemm --family winograd"
# (model, precision, the run's folder, the tree it ran, the tune-model options)
RUNS = [
    ("resnet50", "fp32", "20261129e/resnet50_fp32", "92ffae9", FP32),
    ("vgg16", "fp32", "20261130e/vgg16_fp32", "c66ed81", FP32),
    ("resnet50", "tf32", "20261129e/resnet50_tf32_call1", "70c1b97", "--family tc_wgmma"),
    ("vgg16", "tf32", "20261130e/vgg16_tf32", "c66ed81", "--family tc_wgmma"),
    ("resnet50", "bf16", "20261130b/resnet50_bf16", "e14b68d", "(every family of the dtype)"),
    ("vgg16", "bf16", "20261130b/vgg16_bf16", "e14b68d", "(every family of the dtype)"),
]  # fmt: skip
# Issue 35's targets: ours over eager PyTorch in the same precision, and for bf16 ours inside
# torch.compile over torch.compile alone.
EAGER_TARGET = {"fp32": 1.2, "tf32": 1.0, "bf16": 1.0}
COMPILE_TARGET = {"bf16": 1.0}


def ways(folder: str) -> dict[str, dict]:
    with open(HERE / folder / "model.csv") as fh:
        return {row["way"]: row for row in csv.DictReader(fh)}


def ratio(a: dict, b: dict | None) -> float | None:
    return float(a["median_ms"]) / float(b["median_ms"]) if b else None


def main() -> None:
    print(
        "# ResNet-50 and VGG-16 forward, autotune's convolutions beside PyTorch (H200, batch 32)\n"
    )
    print(
        "Each row is one `autotune bench model` run (`python3 -m autotune tune-model --model M "
        "--batch 32 --dtype P [options]`, then `python3 -m autotune bench model --model M "
        "--batch 32 --precision P --layers`), read from the folder named, made by "
        "`python3 results/h200/models.py`. Medians of 30 forwards in ms; fp32 is TF32 off, tf32 "
        "PyTorch's default (cuDNN TF32), bf16 channels-last. `x eager` is eager's median over "
        "ours; `x compile` torch.compile's over ours inside torch.compile. Compare rows of one "
        "folder only where the host matters: the host's speed differs between machine starts.\n"
    )
    print(
        "| model | precision | eager | ours | x eager (target) | torch.compile | ours in "
        "torch.compile | x compile (target) | rel. error ours (eager) | top-1 | exact plans | "
        "run (tree) | tune-model options |"
    )
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|")
    for model, precision, folder, tree, options in RUNS:
        w = ways(folder)
        eager, ours, comp, ours_c = w["eager"], w["ours"], w.get("compile"), w.get("ours+compile")
        x_eager = ratio(eager, ours)
        x_comp = ratio(comp, ours_c) if comp and ours_c else None
        met = "met" if x_eager >= EAGER_TARGET[precision] else "MISSED"
        comp_cell = "" if x_comp is None else f"{x_comp:.2f}"
        if precision in COMPILE_TARGET and x_comp is not None:
            ok = "met" if x_comp >= COMPILE_TARGET[precision] else "MISSED"
            comp_cell += f" (>= {COMPILE_TARGET[precision]}: {ok})"
        print(
            f"| {model} | {precision} | {float(eager['median_ms']):.3f} | "
            f"{float(ours['median_ms']):.3f} | **{x_eager:.2f}** (>= {EAGER_TARGET[precision]}: "
            f"{met}) | {float(comp['median_ms']):.3f} | {float(ours_c['median_ms']):.3f} | "
            f"{comp_cell} | {ours['rel_error']} ({eager['rel_error']}) | {ours['top1_agree']} | "
            f"{ours['exact_plans']} | `{folder}` ({tree}) | `{options}` |"
        )


if __name__ == "__main__":
    main()
