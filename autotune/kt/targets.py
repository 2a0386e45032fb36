"""Kernel headers of tune_kernel studies: what Kernel Tuner's store_results and
create_device_targets give, from the results database alone, with the launch of each best.

Per kernel, `<kernel>.h` holds `#define` blocks chosen at compile time by -DTARGET_<device>
(Kernel Tuner's device names: every run of characters other than letters and digits made one
underscore) and -DPROBLEM_SIZE_<size> (Kernel Tuner's problem size string, e.g. 4096x4096):
the study's best configuration with its launch (<KERNEL>_GRID_X/Y/Z, <KERNEL>_BLOCK_X/Y/Z,
<KERNEL>_SMEM_BYTES), then per device the configuration best over its sizes, then a default
over all (create_device_targets' rule: the configuration most often among the sizes' top
results, the least total time among equals). `<kernel>.json` is store_results' document
(format 1.0: the configurations within 3% of each best) with an `autotune` section holding
each best's defines and launch.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune import __version__
from autotune.kt.kernel import GRID_NAMES, GivenKernelError
from autotune.kt.stored import TOP_PERCENT, StudyBest, kernel_bests
from autotune.kt.study import LaunchUnknown, stored_kernel
from autotune.model.space import Config, Value
from autotune.store import Store

RESULTS_VERSION = "1.0"  # the store_results format Kernel Tuner 1.x reads
TUNING_MARKER = "kernel_tuner"  # defined by Kernel Tuner (and tune_kernel) while tuning


class TargetsError(ValueError):
    """Nothing to export for the kernels and devices asked (one line)."""


@dataclass(frozen=True, slots=True)
class Target:
    """One (device, problem size) of a kernel: its best, and its launch or why there is none."""

    best: StudyBest
    size: str  # Kernel Tuner's problem size string
    defines: tuple[tuple[str, Value], ...]
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    smem_bytes: int | None
    unknown: str = ""  # why the launch could not be computed from the store


def device_target(name: str) -> str:
    """Kernel Tuner's device name in its results files and TARGET_ macros."""
    return re.sub("[^0-9a-zA-Z]+", "_", name.strip())


def size_text(sizes: tuple[int, int, int]) -> str:
    """Kernel Tuner's problem size string ("x"-joined), trailing dimensions of 1 left out."""
    dims = list(sizes)
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return "x".join(str(d) for d in dims)


def write_targets(
    store: Store,
    output: Path,
    devices: Iterable[str] = (),
    kernels: Iterable[str] = (),
    storage: str = "",
) -> tuple[list[str], list[dict[str, str]]]:
    """Write <kernel>.h and <kernel>.json under `output` for every kernel studied (or those
    named) on every device (or those named). Returns the kernels written and the studies left
    out, each with its reason."""
    devices, kernels = tuple(devices), tuple(kernels)
    bests = kernel_bests(store, devices, kernels)
    missing = sorted(set(kernels) - {b.kernel for b in bests})
    if missing or not bests:
        which = f" of {', '.join(missing)}" if missing else ""
        where = f" on {', '.join(devices)}" if devices else ""
        raise TargetsError(
            f"no verified tune_kernel measurement{which}{where} under timing protocol "
            f"{store.protocol} in the store; tune with autotune.tune_kernel first"
        )
    chosen: dict[str, dict[tuple[str, str], Target]] = {}
    left_out: list[dict[str, str]] = []
    for best in bests:  # newest study first within a kernel and device
        why = _refused(best)
        size = size_text(best.sizes)
        held = chosen.setdefault(best.kernel, {})
        if not why and (best.device, size) in held:
            why = f"superseded by the later study {held[(best.device, size)].best.problem_key}"
        if why:
            left_out.append(
                {"kernel": best.kernel, "device": best.device, "study": best.study, "reason": why}
            )
            continue
        held[(best.device, size)] = _target(best, size)
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for kernel, targets in sorted(chosen.items()):
        if not targets:
            continue
        ordered = [targets[k] for k in sorted(targets, key=_order)]
        capabilities = _capabilities(store)
        (output / f"{kernel}.h").write_text(header(kernel, ordered, capabilities))
        doc = results_document(kernel, ordered, storage, store.protocol, left_out, capabilities)
        (output / f"{kernel}.json").write_text(json.dumps(doc, indent=1) + "\n")
        written.append(kernel)
    return written, left_out


def _refused(best: StudyBest) -> str:
    if not best.kernel.isidentifier():
        return "its name is not a C identifier"
    if 0 in best.sizes:
        return "its problem size depends on the tunables; the header is chosen by size"
    return ""


def _order(key: tuple[str, str]) -> tuple:
    device, size = key
    return (device, [int(d) for d in size.split("x")])


def _target(best: StudyBest, size: str) -> Target:
    params = best.config.as_dict()
    try:
        family = stored_kernel(best.kernel, best.shape)
        plan = family.plan(None, best.config)  # type: ignore[arg-type]
    except (LaunchUnknown, GivenKernelError) as why:
        defines = tuple(params.items())
        return Target(best, size, defines, None, None, None, f"launch not exported: {why}")
    (launch,) = plan.launches
    defines = tuple((k, v) for k, v in plan.defines if k != TUNING_MARKER)
    return Target(best, size, defines, launch.grid, launch.block, launch.smem_bytes)


def _capabilities(store: Store) -> dict[str, str]:
    rows = store.devices()
    return {str(r["name"]): str(r["compute_capability"]) for _, r in rows.iterrows()}


# -- the common configuration (create_device_targets' rule) --------------------------------------


def common_best(targets: list[Target]) -> Config:
    """The configuration found most often among the targets' top results; among those equally
    often, the one of least total time over them."""
    count: Counter[Config] = Counter()
    total: dict[Config, float] = {}
    for t in targets:
        for config, time_ms in t.best.top:
            count[config] += 1
            total[config] = total.get(config, 0.0) + time_ms
    most = max(count.values())
    return min((c for c in count if count[c] == most), key=lambda c: (total[c], c.to_json()))


def _sizeless(target: Target, config: Config) -> tuple[tuple[tuple[str, Value], ...], str]:
    """The defines of `config` without a problem size (no grid), and its block and shared
    memory as defines of the kernel's geometry, or why they are unknown."""
    prefix = target.best.kernel.upper()
    try:
        family = stored_kernel(target.best.kernel, target.best.shape)
        params = config.as_dict()
        block = family.block(params)
        plan = family.plan(None, config)  # type: ignore[arg-type]
    except (LaunchUnknown, GivenKernelError) as why:
        return tuple(config.as_dict().items()), f"launch not exported: {why}"
    defines = [(k, v) for k, v in plan.defines if k != TUNING_MARKER and k not in GRID_NAMES]
    geometry = [(f"{prefix}_BLOCK_{a}", b) for a, b in zip("XYZ", block, strict=True)]
    geometry.append((f"{prefix}_SMEM_BYTES", plan.launches[0].smem_bytes))
    return (*defines, *geometry), ""


# -- the header -------------------------------------------------------------------------------


def header(kernel: str, targets: list[Target], capabilities: dict[str, str]) -> str:
    prefix = kernel.upper()
    devices = list(dict.fromkeys(t.best.device for t in targets))
    sizes = list(dict.fromkeys(t.size for t in targets))
    lines = [
        f"/* {kernel}.h: the tuned configurations of the kernel {kernel}, written by",
        f" * autotune {__version__} (`autotune export --format kernel`) from its results",
        " * database; export again rather than edit.",
        " *",
        " * Compile the kernel with -DTARGET_<device> and -DPROBLEM_SIZE_<size>:",
        *(f" *   TARGET_{device_target(d)}  ({d}, {_arch(capabilities.get(d))})" for d in devices),
        f" *   sizes: {', '.join(f'PROBLEM_SIZE_{s}' for s in sizes)}",
        " * A tuned device and size get that study's best configuration and the launch it was",
        f" * measured with: {prefix}_GRID_X/Y/Z, {prefix}_BLOCK_X/Y/Z and {prefix}_SMEM_BYTES",
        " * (dynamic shared memory). Another size on a tuned device gets the configuration best",
        " * over that device's sizes, anything else the best over all (Kernel Tuner's",
        " * create_device_targets rule); those have no grid, which follows from the size.",
        " */",
        "#pragma once",
        f"#ifndef {TUNING_MARKER} /* only when not tuning */",
        "",
    ]
    first = True
    for t in targets:
        condition = (
            f"defined(TARGET_{device_target(t.best.device)}) && defined(PROBLEM_SIZE_{t.size})"
        )
        lines.append(f"#{'if' if first else 'elif'} {condition}")
        first = False
        lines.append(
            f"/* {t.best.time_ms:.6g} ms, best of {t.best.evaluations} evaluations "
            f"({t.best.failures} failed); study {t.best.problem_key} */"
        )
        lines.extend(_defines(t.defines))
        if t.unknown:
            lines.append(f"/* {t.unknown} */")
        else:
            geometry = [
                *((f"{prefix}_GRID_{a}", g) for a, g in zip("XYZ", t.grid, strict=True)),
                *((f"{prefix}_BLOCK_{a}", b) for a, b in zip("XYZ", t.block, strict=True)),
                (f"{prefix}_SMEM_BYTES", t.smem_bytes),
            ]
            lines.extend(_defines(geometry))
    for device in devices:
        mine = [t for t in targets if t.best.device == device]
        defines, unknown = _sizeless(mine[0], common_best(mine))
        lines.append(f"#elif defined(TARGET_{device_target(device)})")
        lines.append(f"/* best over this device's {len(mine)} tuned size(s) */")
        lines.extend(_defines(defines))
        lines.extend([f"/* {unknown} */"] if unknown else [])
    defines, unknown = _sizeless(targets[0], common_best(targets))
    lines.append("#else /* default: best over every device and size tuned */")
    lines.extend(_defines(defines))
    lines.extend([f"/* {unknown} */"] if unknown else [])
    lines += ["#endif", "", f"#endif /* {TUNING_MARKER} */", ""]
    return "\n".join(lines)


def _defines(pairs: Iterable[tuple[str, Any]]) -> list[str]:
    return [f"#define {k} {int(v) if isinstance(v, bool) else v}" for k, v in pairs]


def _arch(capability: str | None) -> str:
    if not capability:
        return "arch unknown"
    major, _, minor = capability.partition(".")
    return f"sm_{major}{minor or '0'}"


# -- the JSON ---------------------------------------------------------------------------------


def results_document(
    kernel: str,
    targets: list[Target],
    storage: str,
    protocol: int,
    left_out: list[dict[str, str]],
    capabilities: dict[str, str],
) -> dict[str, Any]:
    """Kernel Tuner's store_results document for these targets, with autotune's section."""
    data = []
    for t in targets:
        for config, time_ms in t.best.top:
            data.append(
                {
                    "device_name": device_target(t.best.device),
                    "problem_size": t.size,
                    "tunable_parameters": config.as_dict(),
                    "time": time_ms,
                }
            )
    names = list(dict.fromkeys(k for d in data for k in d["tunable_parameters"]))
    best = [
        {
            "device": t.best.device,
            "target": device_target(t.best.device),
            "compute_capability": capabilities.get(t.best.device),
            "problem_size": t.size,
            "study": t.best.problem_key,
            "config": t.best.config.as_dict(),
            "time_ms": t.best.time_ms,
            "evaluations": t.best.evaluations,
            "failures": t.best.failures,
            "measured_at": t.best.measured_at,
            "defines": dict(t.defines),
            "grid": list(t.grid) if t.grid else None,
            "block": list(t.block) if t.block else None,
            "smem_bytes": t.smem_bytes,
            **({"launch_unknown": t.unknown} if t.unknown else {}),
        }
        for t in targets
    ]
    return {
        "version_number": RESULTS_VERSION,
        "kernel_name": kernel,
        "objective": "time",
        "objective_higher_is_better": False,
        "tunable_parameters": names,
        "data": data,
        "autotune": {
            "version": __version__,
            "storage": storage,
            "timing_protocol": protocol,
            "top_percent": TOP_PERCENT,
            "best": best,
            "left_out": [x for x in left_out if x["kernel"] == kernel],
        },
    }


__all__ = ["TargetsError", "common_best", "device_target", "header", "size_text", "write_targets"]
