"""Each convolution's time in the model over its stored time, against what the runtime's
padding copy of its input costs at the device's measured copy bandwidth (read the caller's
input, write the pre-padded one the kernel reads; 0 for an unpadded layer). From a
`bench model --layers` table:
    python results/h200/20261129e/pad_excess.py LAYERS.csv PADDING COPY_GBPS
PADDING: the layers' padding by kernel size, as k:p pairs (VGG-16 and ResNet-50: 1:0,3:1,7:3).
"""

import csv
import re
import sys

path, padding, gbps = sys.argv[1], dict(p.split(":") for p in sys.argv[2].split(",")), float(sys.argv[3])
print("| layer | problem | in model - stored (ms) | padding copy at copy bandwidth (ms) |")
print("|---|---|--:|--:|")
total_excess = total_copy = 0.0
for row in csv.DictReader(open(path)):
    f = dict(re.findall(r"(\w+)=(\w+)", row["problem"]))
    n, k, c, b, s = (int(f[x]) for x in ("N", "K", "C", "B", "stride"))  if "stride" in f else (int(f["N"]), int(f["K"]), int(f["C"]), int(f["B"]), 1)
    p = int(padding[str(k)])
    side = (n - 1) * s + k  # the pre-padded input the kernel reads
    element = 2 if f.get("dtype", "fp32") in ("bf16", "fp16") else 4
    copy_ms = 0.0 if p == 0 else b * c * element * ((side - 2 * p) ** 2 + side**2) / (gbps * 1e9) * 1e3
    excess = float(row["in_model_ms"]) - float(row["stored_ms"])
    total_excess += excess
    total_copy += copy_ms
    print(f"| {row['layer']} | N={n},K={k},C={c},stride={s} | {excess:.4f} | {copy_ms:.4f} |")
print(f"| all | | {total_excess:.3f} | {total_copy:.3f} |")
