"""Session 53's queued check of 55f14ce (a plain call of a stored shape may take a family's
fused measurement): ResNet-50's bf16 shapes served over session 53's store before it (session
53's call 3, `dispatch_new_1`) and after it (this session's call 1), per shape the family and
the GPU time a call. From the checkout root:
    python3 results/h200/20261130f/moved.py > results/h200/20261130f/call1/moved.md"""

import csv
import io
import statistics
import tarfile

HERE = "results/h200/20261130f"


def rows(archive: str, member: str) -> dict[str, dict]:
    with tarfile.open(archive) as tar:
        text = tar.extractfile(member).read().decode()
    return {r["shape"]: r for r in csv.DictReader(io.StringIO(text))}


before = rows("results/h200/20261130e/call3/ab.tgz", "ab/dispatch_new_1.csv")
after = rows(f"{HERE}/call1/call1.tgz", "dispatch/dispatch.csv")
print("| shape | family before | us before | family after | us after | after / before | cuDNN us |")
print("|---|---|--:|---|--:|--:|--:|")
ratios = []
for shape, a in after.items():
    b = before[shape]
    ratio = float(a["ours_gpu_us"]) / float(b["ours_gpu_us"])
    if a["family"] != b["family"]:
        ratios.append(ratio)
    print(
        f"| {shape.split(',dtype')[0]} | {b['family']} | {b['ours_gpu_us']} | {a['family']} | "
        f"{a['ours_gpu_us']} | {ratio:.2f} | {a['cudnn_gpu_us']} |"
    )
print(
    f"\n{len(ratios)} of {len(after)} shapes changed family; the median of their GPU time a call "
    f"after over before: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})."
)
