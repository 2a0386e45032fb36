"""Where a CUDA-graph forward's time goes: a torchvision model (bf16 channels-last) under
torch.compile(mode="reduce-overhead"), PyTorch's convolutions against autotune's
(`optimize()` from the store), each forward profiled with PyTorch's profiler (CUPTI).

Per way, the medians over the profiled forwards of: the time CUDA events put on the forward
(as `autotune bench model` reads it), the host's time from the call to the first kernel on the
GPU (the head: guards, input copies, the graph's launch), the span from the first kernel's
start to the last's end, the GPU's busy time inside it (the kernels' union) and its idle time,
how many graphs were launched and kernels run; then each kernel class's time a forward (ours,
Triton, cuDNN and other libraries, copies and fills) and the kernels by time.

    python3 graph_replay.py --model resnet50 --batch 32 [--storage URL] [--forwards 20] > out.md

Each profiled forward starts on an idle GPU after a synchronize and a 2 ms sleep, as `bench
model` times it (it waits for each forward's end); a forward's GPU work is what starts between
its call and the next one's.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile, record_function

from autotune.runtime.calls import DEFAULT_LAUNCHER, LAUNCHER_NAMES
from autotune.runtime.dispatch import Runtime
from autotune.runtime.models import optimize

# The table's columns: a forward's figures (besides the events' ms), and its kernels' classes
COLUMNS = {
    "head us": "head_us",
    "span us": "span_us",
    "busy us": "busy_us",
    "idle us": "idle_us",
    "graphs": "graphs",
    "kernels": "kernels",
}
CLASSES = ("ours", "Triton", "cuDNN and libraries", "PyTorch's own", "copies and fills")
OURS = ("tc_wgmma", "tc_implicit_gemm", "implicit_gemm", "winograd", "sgemm", "im2col")


def kernel_class(name: str, cat: str) -> str:
    if cat != "kernel":
        return "copies and fills"
    if name.startswith(OURS):
        return "ours"
    if name.startswith("triton"):
        return "Triton"
    if "cudnn" in name or "xmma" in name or "cutlass" in name or "nchwToNhwc" in name:
        return "cuDNN and libraries"
    return "PyTorch's own"


def forward_stats(forward, x, forwards: int) -> tuple[list, dict, dict]:
    with torch.no_grad():
        for _ in range(5):  # reduce-overhead records its graph in the first calls
            forward(x)
        torch.cuda.synchronize()
        events = []
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(forwards):
                torch.cuda.synchronize()
                time.sleep(0.002)
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                with record_function(f"forward_{i}"):
                    forward(x)
                end.record()
                events.append((start, end))
            torch.cuda.synchronize()
    event_ms = [s.elapsed_time(e) for s, e in events]
    trace = Path(tempfile.mktemp(suffix=".json"))
    prof.export_chrome_trace(str(trace))
    return forward_rows(json.loads(trace.read_text())["traceEvents"], event_ms)


def forward_rows(trace_events: list[dict], event_ms: list[float]) -> tuple[list, dict, dict]:
    """A row of figures for each forward of the trace (its annotation, then the kernels, copies
    and fills on the GPU that start before the next forward's), each (class, kernel)'s time in
    each forward, and each (class before, class after)'s idle time between them."""
    spans = sorted((e for e in trace_events if e.get("ph") == "X"), key=lambda e: e["ts"])
    gpu = [e for e in spans if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    calls = [
        e for e in spans if e.get("cat") == "user_annotation" and e["name"].startswith("forward_")
    ]
    launches = [e["ts"] for e in spans if e["name"] in ("cudaGraphLaunch", "cuGraphLaunch")]
    rows, by_kernel, gaps_by_pair = [], defaultdict(list), defaultdict(list)
    for i, call in enumerate(calls):
        begin = call["ts"]
        following = calls[i + 1]["ts"] if i + 1 < len(calls) else float("inf")
        mine = [e for e in gpu if begin <= e["ts"] < following]
        if not mine:
            continue
        first, last = mine[0]["ts"], max(e["ts"] + e["dur"] for e in mine)
        busy, reach, before = 0.0, first, None
        gaps = defaultdict(float)  # idle time before a kernel, by (class before, class after)
        for e in mine:  # the union of the intervals, sorted by start
            s, t = max(e["ts"], reach), e["ts"] + e["dur"]
            here = kernel_class(e["name"], e["cat"])
            if before is not None and e["ts"] > reach:
                gaps[(before, here)] += e["ts"] - reach
            if t > s:
                busy += t - s
                reach = t
            before = here
        for pair, us in gaps.items():
            gaps_by_pair[pair].append(us)
        classes = defaultdict(float)
        names = defaultdict(float)
        for e in mine:
            classes[kernel_class(e["name"], e["cat"])] += e["dur"]
            names[(kernel_class(e["name"], e["cat"]), e["name"][:90])] += e["dur"]
        for k, v in names.items():
            by_kernel[k].append(v)
        rows.append(
            {
                "event_ms": event_ms[i],
                "head_us": first - begin,
                "span_us": last - first,
                "busy_us": busy,
                "idle_us": (last - first) - busy,
                "graphs": sum(1 for t in launches if begin <= t < following),
                "kernels": len(mine),
                "classes": classes,
            }
        )
    return rows, by_kernel, gaps_by_pair


def med(values) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--storage", default=None)
    parser.add_argument("--forwards", type=int, default=20)
    parser.add_argument(
        "--launcher",
        action="append",
        choices=LAUNCHER_NAMES,
        help="The runtime's launchers to compare (repeatable; default: the runtime's default)",
    )
    args = parser.parse_args()
    args.launcher = args.launcher or [DEFAULT_LAUNCHER]
    torch.manual_seed(0)
    base = getattr(torchvision.models, args.model)(weights=None).eval().cuda()
    model = base.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    ways = {"compile+graphs": torch.compile(model, mode="reduce-overhead")}
    for launcher in args.launcher:
        ours = optimize(copy.deepcopy(model), x, runtime_=Runtime(args.storage, launcher=launcher))
        tag = "ours" if launcher == DEFAULT_LAUNCHER else f"ours[{launcher}]"
        ways[f"{tag}+compile+graphs"] = torch.compile(ours, mode="reduce-overhead")
    print(f"# {args.model} batch {args.batch} bf16 channels-last: a CUDA-graph forward's time\n")
    print(
        f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, "
        f"{args.forwards} forwards a way, medians.\n"
    )
    print("| way | events ms | " + " | ".join(COLUMNS) + " | " + " us | ".join(CLASSES) + " us |")
    print("|---|" + "--:|" * (1 + len(COLUMNS) + len(CLASSES)))
    tops, idle = {}, {}
    for way, forward in ways.items():
        rows, by_kernel, gaps = forward_stats(forward, x, args.forwards)
        torch._dynamo.reset()
        if not rows:
            print(f"| {way} | the trace holds no kernels of its forwards |")
            continue
        idle[way] = (gaps, len(rows))
        cells = [f"{med(r['event_ms'] for r in rows):.3f}"]
        cells += [f"{med(r[key] for r in rows):.1f}" for key in COLUMNS.values()]
        cells += [f"{med(r['classes'].get(c, 0.0) for r in rows):.1f}" for c in CLASSES]
        print(f"| {way} | " + " | ".join(cells) + " |")
        tops[way] = (by_kernel, len(rows))
    print("\n## Idle time inside a forward, by the kernels' classes on either side of it\n")
    print("| way | before | after | idle us a forward | forwards with it |")
    print("|---|---|---|--:|--:|")
    for way, (gaps, n) in idle.items():
        for (before, after), per in sorted(gaps.items(), key=lambda kv: -sum(kv[1])):
            print(f"| {way} | {before} | {after} | {sum(per) / n:.1f} | {len(per)}/{n} |")
    for way, (by_kernel, n) in tops.items():
        print(f"\n## {way}: kernels by time a forward (us, summed over a forward's launches)\n")
        print("| class | kernel | us a forward | launches' share of forwards |")
        print("|---|---|--:|--:|")
        ranked = sorted(by_kernel.items(), key=lambda kv: -sum(kv[1]) / n)
        for (klass, name), per in ranked[:25]:
            print(f"| {klass} | `{name}` | {sum(per) / n:.1f} | {len(per)}/{n} |")


if __name__ == "__main__":
    main()
