"""Measure every device ceiling (FP32 and the dense tensor-core peaks) by timing protocol 2, as
`autotune device` does, and write them as a Markdown table (without a results database).

    python results/h100/precision/measure_ceilings.py OUT_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

from autotune.gpu.compiler import Compiler
from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.library_tasks import MeasureCeilings
from autotune.gpu.timing import TimingPolicy
from autotune.model.records import spread
from autotune.tuning.baselines import CEILING_FMA_SOURCE


def main() -> None:
    out = Path(sys.argv[1])
    with GpuEvaluator() as evaluator:
        fma = Compiler(arch=evaluator.device.arch).compile_source(CEILING_FMA_SOURCE, ())
        result = evaluator.call(MeasureCeilings(fma.cubin, TimingPolicy()), 300.0)
        device = evaluator.device
    if not isinstance(result, list):
        raise SystemExit(f"ceilings not measured: {result.error}")
    lines = [
        f"# Ceilings of {device.name} ({device.sm_count} SMs, driver {device.driver_version}), "
        "timing protocol 2",
        "",
        "| ceiling | value (median) | unit | samples | spread | fastest sample, ms | what |",
        "|---|--:|---|--:|--:|--:|---|",
    ]
    for c in result:
        lines.append(
            f"| {c.name} | {c.value:,.0f} | {c.unit} | {len(c.samples_ms)} "
            f"| {spread(list(c.samples_ms)):.3f} | {min(c.samples_ms):.4f} | {c.detail} |"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
