"""What `autotune remeasure --family tc_wgmma --top 3` of call 1 printed had its comparison not
failed (the bug d449f04 mends): per dtype, each of the 42 layers' best tc_wgmma time of the
previous code (digest 93407bf2e826e685, sessions 54-55) beside its best of this code (the short
step), through the same functions the command uses. Reads a store; measures nothing. From the
checkout root:
    python3 results/h200/20261130h/remeasured.py STORE.db > remeasured.md"""

import math
import sys

from autotune.families import kernel_digests
from autotune.model.records import TIMING_PROTOCOL
from autotune.model.space import DeviceLimits
from autotune.reports import format_table
from autotune.store import Store
from autotune.tuning.remeasure import protocol_comparison, remeasure_studies

DEVICE = "NVIDIA H200"
SETS = ("alexnet", "overfeat", "vgg16", "resnet50")


def main(path: str) -> None:
    store = Store(path)
    current = kernel_digests()
    previous = store.previous_kernels(DEVICE, current)["tc_wgmma"]
    print(f"# tc_wgmma's 3 fastest configurations a layer, previous code ({previous}) and this\n")
    for dtype in ("tf32", "bf16", "fp16"):
        studies, _, _ = remeasure_studies(
            store, DEVICE, DeviceLimits(), 3, ("tc_wgmma",), dtypes=(dtype,), layouts=("NHWC",),
            kernels=current,
        )  # fmt: skip
        table = protocol_comparison(
            store, DEVICE, studies, TIMING_PROTOCOL, old_kernels={"tc_wgmma": previous},
            new_kernels=current,
        )  # fmt: skip
        ratios = [r for r in table["ratio"] if r > 0]
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"## {dtype}: {len(table)} layers, GFlop/s ratio (this code over the previous)")
        print(f"geometric mean {geomean:.3f}, {min(ratios):.3f} to {max(ratios):.3f}\n")
        print(format_table(table.sort_values("ratio"), "markdown"))
        print()


if __name__ == "__main__":
    main(sys.argv[1])
