"""`autotune bench model --layers`: where a model's forward time goes, convolution by
convolution, beside what the store says each plan costs.

A model's forward can run slower than the sum of its plans' stored times when a plan behaves
otherwise inside the model than where it was tuned: a configuration tuned without its fused
epilogue, a borrowed (nearest-shape) plan, a layout copy. Per convolution of our forward: its
plan (family, measured on which shape), the stored time, the expected time (the stored one plus
what the call pays besides at the device's copy bandwidth: the padding copy into the plan's
pre-padded input, an epilogue the plan does not fuse, layout copies, setup), the time it took
in the model (CUDA events around the layer's call, the median of the profiled forwards), and
eager PyTorch's convolution of the same module (cuDNN; its BatchNorm, ReLU and add run apart in
eager). A layer at 1.5x its expected time or more is one to profile.

Each profiled forward is queued behind a spin kernel that keeps the GPU busy while the host
launches the whole forward, so the events time the layers' kernels, not the host: on a slow
host a batch-32 forward is launch-bound (the H200 machine's ResNet-50 in bf16: 1.6 ms of host
time for a 1.7 ms forward), and without it every small layer measured as the gap between two
launches, 2-3x its kernel."""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

LAYER_COLUMNS = (
    "layer",
    "problem",
    "family",
    "measured_on",
    "stored_ms",
    "expected_ms",
    "in_model_ms",
    "in_model_over_expected",
    "eager_conv_ms",
)


def flat_name(name: str) -> str:
    """A module's name as both models share it: our fused copies are named after the layer
    they stand for ("layer1.0.conv3" -> "layer1_0_conv3__fused"), so compare without dots and
    without the suffix."""
    return name.removesuffix("__fused").replace(".", "_")


def layer_ms(
    torch, forward: Callable, x, modules: Iterable, repeats: int, key=None, clock=time.perf_counter
) -> dict:
    """{module name: (median GPU ms per forward, what `key(module, args)` said of its call)}
    over `repeats` forwards, from CUDA events recorded by hooks before and after each module
    in `modules` ((name, module) pairs). The events serialise nothing, and each forward is
    launched while the GPU spins (`torch.cuda._sleep`) for twice the host time of an untimed
    one (`clock`, seconds), so that the GPU never waits for a launch inside it."""
    events: dict[str, list] = {}
    keys: dict[str, object] = {}
    handles = []

    def before(name):
        def hook(module, args):
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            events.setdefault(name, []).append([start, None])

        return hook

    def after(name):
        def hook(module, args, output):
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            events[name][-1][1] = end
            if key is not None and name not in keys:
                keys[name] = key(module, args)

        return hook

    for name, module in modules:
        handles.append(module.register_forward_pre_hook(before(name)))
        handles.append(module.register_forward_hook(after(name)))
    per_forward: dict[str, list[float]] = {}
    try:
        with torch.no_grad():
            torch.cuda.synchronize()
            started = clock()
            forward(x)  # untimed, hooks included: the host time a forward takes to launch
            host_ms = (clock() - started) * 1e3
            torch.cuda.synchronize()
            lead = int(2 * host_ms * _sleep_cycles_per_ms(torch))
            for _ in range(repeats):
                events.clear()
                torch.cuda._sleep(lead)
                forward(x)
                torch.cuda.synchronize()
                for name, pairs in events.items():
                    total = sum(start.elapsed_time(end) for start, end in pairs)
                    per_forward.setdefault(name, []).append(total)
    finally:
        for handle in handles:
            handle.remove()
    return {name: (statistics.median(t), keys.get(name)) for name, t in per_forward.items()}


def _sleep_cycles_per_ms(torch) -> float:
    """`torch.cuda._sleep`'s cycles a millisecond on this GPU, timed (its clock may run at
    another rate than the nominal one)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 10_000_000
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return cycles / max(start.elapsed_time(end), 1e-3)


@dataclass(frozen=True, slots=True)
class LayerCall:
    """What the runtime did for a layer's call: the plan it chose (runtime/choice.Choice) and
    the padding copy of the call's input, priced at the copy bandwidth (0 for none)."""

    choice: object
    padding_ms: float = 0.0

    @property
    def expected_ms(self) -> float:
        return self.choice.expected_ms + self.padding_ms


def layer_rows(ours: dict, eager: dict) -> list[dict]:
    """Rows of the layer table, in our forward's order: `ours` maps each of our layers to
    (median ms, its LayerCall or None), `eager` each eager convolution to (median ms, _)."""
    eager_by_flat = {flat_name(n): ms for n, (ms, _) in eager.items()}
    rows = []
    for name, (ms, call) in ours.items():
        choice = call.choice if call is not None else None
        stored = choice.time_ms if choice is not None else None
        expected = call.expected_ms if call is not None else None
        if expected is not None and not math.isfinite(expected):
            expected = None  # a cost not known without the device's copy bandwidth
        eager_ms = eager_by_flat.get(flat_name(name))
        rows.append(
            {
                "layer": name,
                "problem": choice.problem.key if choice else "",
                "family": choice.family if choice else "",
                "measured_on": choice.measured_on if choice else "",
                "stored_ms": f"{stored:.4f}" if stored is not None else "",
                "expected_ms": f"{expected:.4f}" if expected is not None else "",
                "in_model_ms": f"{ms:.4f}",
                "in_model_over_expected": f"{ms / expected:.2f}" if expected else "",
                "eager_conv_ms": f"{eager_ms:.4f}" if eager_ms is not None else "",
            }
        )
    return rows


def write_layers(rows: list[dict], path: Path, title: str) -> list[Path]:
    """`path`.csv and `path`.md: the layer table, with its sums (the stored times' and the
    model's) and the layers whose time in the model is 1.5x their stored time or more."""
    path.parent.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = path.with_suffix(".csv"), path.with_suffix(".md")
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=LAYER_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    total = sum(float(r["in_model_ms"]) for r in rows)
    stored = sum(float(r["stored_ms"]) for r in rows if r["stored_ms"])
    expected = sum(float(r["expected_ms"]) for r in rows if r["expected_ms"])
    eager = sum(float(r["eager_conv_ms"]) for r in rows if r["eager_conv_ms"])
    slow = [
        r for r in rows if r["in_model_over_expected"] and float(r["in_model_over_expected"]) >= 1.5
    ]
    lines = [
        f"# {title}: convolution by convolution",
        "",
        f"Our convolutions: {total:.3f} ms a forward in the model against {stored:.3f} ms "
        f"stored and {expected:.3f} ms expected (stored, plus the padding copies, unfused "
        "epilogues and layout copies the calls pay, at the copy bandwidth); eager PyTorch's "
        f"convolutions alone: {eager:.3f} ms. {len(slow)} of {len(rows)} layers took 1.5x "
        "their expected time or more in the model. GPU times: each forward was launched while "
        "the GPU was kept busy, so no layer waited for the host.",
        "",
        "| " + " | ".join(LAYER_COLUMNS) + " |",
        "|---|---|---|---|--:|--:|--:|--:|--:|",
        *("| " + " | ".join(str(r[c]) for c in LAYER_COLUMNS) + " |" for r in rows),
    ]
    md_path.write_text("\n".join(lines) + "\n")
    return [csv_path, md_path]
