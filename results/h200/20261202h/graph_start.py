"""Where the start of a CUDA-graph forward goes: session 75 (`../20261202g/graph_replay.py`)
found one idle gap a forward inside the span of ours + torch.compile(mode="reduce-overhead"),
from CUDA-graph trees' copy of the input to the graph's first kernel (162-180 us in
ResNet-50). This splits it with the trace's host side and times the forward without the
profiler, the way the gap would show to a user.

Per way (torchvision model, bf16 channels-last, batch 32):
- `events ms`: CUDA events around a forward on an idle GPU, no profiler (as `bench model`);
- `GPU ms`: the same behind a 2 ms spin of the GPU (torch.cuda._sleep), so the host's work
  before the launch is hidden: the GPU's own time for the forward;
and from 20 profiled forwards (PyTorch's profiler, CUPTI), medians of:
- `copy -> launch us` (host): from the runtime call that queued the last work before the
  graph (the input's copy) to the `cudaGraphLaunch` call;
- `launch call us` (host): that call's own time;
- `launch -> 1st kernel us`: from the `cudaGraphLaunch` call to the graph's first kernel on
  the GPU (CUPTI puts both on one clock);
- `gap us`: from the end of the work before the graph to its first kernel (session 75's);
- `graph kernels`: the kernels launched under that call (one correlation id);
then the host's operators between the copy's call and the launch, by their time.

    python3 graph_start.py --model resnet50 [--storage URL] [--forwards 20] > out.md
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "20261202g"))
from graph_replay import med  # noqa: E402  (session 75's script, as it ran)

from autotune.runtime.dispatch import Runtime  # noqa: E402
from autotune.runtime.models import optimize  # noqa: E402

GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")
# The table's columns of the start, from the trace
START = {
    "copy -> launch us": "copy_to_launch",
    "launch call us": "launch_call",
    "launch -> 1st kernel us": "launch_to_first",
    "gap us": "gap",
}
SPIN_CYCLES = 4_000_000  # about 2 ms at 1.98 GHz


def timed(forward, x, n: int, spin: bool) -> float:
    """Median ms of CUDA events around a forward, the GPU idle before it, or behind a spin."""
    times = []
    with torch.no_grad():
        for _ in range(n):
            torch.cuda.synchronize()
            time.sleep(0.002)
            if spin:
                torch.cuda._sleep(SPIN_CYCLES)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            forward(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def profiled(forward, x, forwards: int) -> list[dict]:
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(forwards):
            torch.cuda.synchronize()
            time.sleep(0.002)
            with record_function(f"forward_{i}"):
                forward(x)
        torch.cuda.synchronize()
    trace = Path(tempfile.mktemp(suffix=".json"))
    prof.export_chrome_trace(str(trace))
    return json.loads(trace.read_text())["traceEvents"]


def cid(event: dict):
    """The CUPTI correlation id that ties a runtime call to the GPU work it queued."""
    return event.get("args", {}).get("correlation")


def start_rows(events: list[dict]) -> tuple[list[dict], dict]:
    """A row of the start's figures for each forward of the trace that launched a graph, and
    the host's operators between the copy's call and the launch: name -> us in each forward."""
    spans = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])
    gpu = [e for e in spans if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    runtime = [e for e in spans if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    ops = [e for e in spans if e.get("cat") == "cpu_op"]
    calls = [e for e in spans if e.get("cat") == "user_annotation"]
    calls = [e for e in calls if e["name"].startswith("forward_")]
    rows, between = [], defaultdict(list)
    for i, call in enumerate(calls):
        begin = call["ts"]
        following = calls[i + 1]["ts"] if i + 1 < len(calls) else float("inf")
        mine = [e for e in runtime if begin <= e["ts"] < following]
        launch = next((e for e in mine if e["name"] in GRAPH_LAUNCHES), None)
        if launch is None:
            continue
        pre = [e for e in mine if e["ts"] < launch["ts"]]
        pre_ids = {cid(e) for e in pre} - {None}
        inside = [e for e in gpu if cid(e) == cid(launch)]
        before = [e for e in gpu if cid(e) in pre_ids]
        if not inside or not before:
            continue
        before_ids = {cid(e) for e in before}
        last_call = max(e["ts"] for e in pre if cid(e) in before_ids)
        first = min(e["ts"] for e in inside)
        rows.append(
            {
                "copy_to_launch": launch["ts"] - last_call,
                "launch_call": launch["dur"],
                "launch_to_first": first - launch["ts"],
                "gap": first - max(e["ts"] + e["dur"] for e in before),
                "graph_kernels": len(inside),
            }
        )
        names = defaultdict(float)
        for e in ops:
            if last_call <= e["ts"] < launch["ts"]:
                names[e["name"]] += e["dur"]
        for name, us in names.items():
            between[name].append(us)
    return rows, between


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--storage", default=None)
    parser.add_argument("--forwards", type=int, default=20)
    parser.add_argument("--timed", type=int, default=50, help="forwards timed without the profiler")
    args = parser.parse_args()
    torch.manual_seed(0)
    base = getattr(torchvision.models, args.model)(weights=None).eval().cuda()
    model = base.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    ours = optimize(copy.deepcopy(model), x, runtime_=Runtime(args.storage))
    ways = {
        "compile+graphs": torch.compile(model, mode="reduce-overhead"),
        "ours+compile+graphs": torch.compile(ours, mode="reduce-overhead"),
    }
    print(f"# {args.model} batch {args.batch} bf16 channels-last: a CUDA-graph forward's start\n")
    print(
        f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}; timed:"
        f" {args.timed} forwards,"
        f" profiled: {args.forwards}, medians.\n"
    )
    print("| way | events ms | GPU ms | " + " | ".join(START) + " | graph kernels |")
    print("|---|--:|--:|" + "--:|" * (len(START) + 1))
    host_ops = {}
    for way, forward in ways.items():
        with torch.no_grad():
            for _ in range(5):  # reduce-overhead records its graph in the first calls
                forward(x)
        idle, gpu_only = timed(forward, x, args.timed, False), timed(forward, x, args.timed, True)
        rows, between = start_rows(profiled(forward, x, args.forwards))
        torch._dynamo.reset()
        cells = [f"{idle:.3f}", f"{gpu_only:.3f}"]
        cells += [f"{med(r[k] for r in rows):.1f}" for k in START.values()]
        cells.append(f"{med(r['graph_kernels'] for r in rows):.0f}")
        print(f"| {way} | " + " | ".join(cells) + f" |  <!-- {len(rows)} forwards -->")
        host_ops[way] = (between, len(rows))
    for way, (between, n) in host_ops.items():
        print(f"\n## {way}: the host's operators between the copy's call and the launch\n")
        print("| operator | us a forward (summed, nested ones too) | forwards with it |")
        print("|---|--:|--:|")
        for name, per in sorted(between.items(), key=lambda kv: -sum(kv[1]))[:15]:
            print(f"| `{name[:80]}` | {sum(per) / max(n, 1):.1f} | {len(per)}/{n} |")


if __name__ == "__main__":
    main()
