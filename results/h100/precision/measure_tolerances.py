"""Measure what the dtype tolerances of model/precision.py must separate (issue 20).

For every layer of the shape sets, dtype and layout: the relative L2 error (against the float64
reference over the stored inputs, the tuner's check) of cuDNN's own output in that dtype and
layout (PyTorch, benchmark mode, TF32 only for tf32), and of that output less one term of every
output's sum (what a kernel that drops a term writes). Inputs are the ones the baseline's check
draws (same seed). Writes tolerances.csv (one row per layer, dtype and layout) and tolerances.md
(the summary per dtype and layout, then the rows).

    python results/h100/precision/measure_tolerances.py OUT_DIR [--cache DIR] [--sets a,b]
"""

from __future__ import annotations

import argparse
import csv
import math
import time
import zlib
from pathlib import Path

import tomllib

from autotune.families import conv2d
from autotune.gpu.compiler import Compiler
from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.session import Check
from autotune.gpu.timing import QUICK_TIMING
from autotune.gpu.torch_conv import CudnnPrecision, PrecisionProbe
from autotune.model.precision import DTYPES, LAYOUTS, precision_of
from autotune.model.problem import ConvProblem
from autotune.model.shapes import SHAPE_SETS_FILE, named_shapes

SETS = ("alexnet", "overfeat", "vgg16")
COLUMNS = (
    "set",
    "layer",
    "key",
    "dtype",
    "layout",
    "terms",
    "cudnn_error",
    "dropped_error",
    "one_over_sqrt_terms",
    "tolerance",
    "note",
)


def problems(sets: list[str]):
    spec = tomllib.loads(SHAPE_SETS_FILE.read_text())
    for name in sets:
        layers = [layer.get("name", "") for layer in spec[name]["layers"]]
        yield from ((name, layer, p) for layer, p in zip(layers, named_shapes(name), strict=True))


def with_precision(p: ConvProblem, dtype: str, layout: str) -> ConvProblem:
    return ConvProblem(p.N, p.K, p.C, p.F, p.B, p.stride, dtype=dtype, layout=layout)


def compile_all(compiler: Compiler, sets: list[str]) -> None:
    for _, _, p in problems(sets):
        for dtype in DTYPES:
            for layout in LAYOUTS:
                compiler.compile(conv2d.reference_plan(with_precision(p, dtype, layout)))


def measure(evaluator, compiler: Compiler, sets: list[str], writer) -> list[dict]:
    """Every row, also written to `writer` (a csv.DictWriter) as it comes."""
    rows = []
    for set_name, layer, base in problems(sets):
        for dtype in DTYPES:
            for layout in LAYOUTS:
                p = with_precision(base, dtype, layout)
                ref_plan = conv2d.reference_plan(p)
                ref = compiler.compile(ref_plan)
                seed = zlib.crc32(f"cudnn|{p.key}".encode())  # the baseline's inputs
                check = Check(
                    conv2d.buffers(p), ref_plan, ref.cubin, ref.key, 1.0, QUICK_TIMING, seed
                )
                probe = evaluator.call(CudnnPrecision(p, check), 300.0)
                if not isinstance(probe, PrecisionProbe):
                    raise SystemExit(f"{p.key}: {probe.status.value} {probe.error}")
                terms = p.C * p.K * p.K
                rows.append(
                    {
                        "set": set_name,
                        "layer": layer,
                        "key": p.key,
                        "dtype": dtype,
                        "layout": layout,
                        "terms": terms,
                        "cudnn_error": f"{probe.cudnn:.3e}",
                        "dropped_error": f"{probe.dropped:.3e}",
                        "one_over_sqrt_terms": f"{1 / math.sqrt(terms):.3e}",
                        "tolerance": f"{precision_of(dtype).tolerance:.0e}",
                        "note": probe.note,
                    }
                )
                writer.writerow(rows[-1])
                print(p.key, rows[-1]["cudnn_error"], rows[-1]["dropped_error"], flush=True)
    return rows


def summary(rows: list[dict]) -> list[str]:
    lines = [
        "| dtype | layout | cuDNN error, max (layer) | dropped-term error, min (layer) "
        "| tolerance | cuDNN margin | dropped margin |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for dtype in DTYPES:
        for layout in LAYOUTS:
            group = [r for r in rows if r["dtype"] == dtype and r["layout"] == layout]
            if not group:
                continue
            worst = max(group, key=lambda r: float(r["cudnn_error"]))
            least = min(group, key=lambda r: float(r["dropped_error"]))
            tol = precision_of(dtype).tolerance
            lines.append(
                f"| {dtype} | {layout} | {worst['cudnn_error']} ({worst['set']} "
                f"{worst['layer']}) | {least['dropped_error']} ({least['set']} {least['layer']}) "
                f"| {tol:.0e} | {tol / float(worst['cudnn_error']):.1f}x "
                f"| {float(least['dropped_error']) / tol:.1f}x |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cache", type=Path, default=None, help="NVRTC cubin cache directory")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--compile-only", action="store_true", help="fill the cache and stop")
    args = parser.parse_args()
    sets = args.sets.split(",")
    if args.compile_only:
        compile_all(Compiler(arch="sm_90", cache_dir=args.cache), sets)
        return
    began = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    with GpuEvaluator() as evaluator, open(args.out / "tolerances.csv", "w", newline="") as fh:
        compiler = Compiler(arch=evaluator.device.arch, cache_dir=args.cache)
        writer = csv.DictWriter(fh, COLUMNS)
        writer.writeheader()
        rows = measure(evaluator, compiler, sets, writer)
        device = evaluator.device.name
    head = [
        f"# Relative L2 errors against the float64 reference over the stored inputs ({device})",
        "",
        f"Sets {', '.join(sets)}; cuDNN through PyTorch (benchmark mode, TF32 only for tf32); "
        "'dropped': cuDNN's output less x[b, C-1, oy*s+K-1, ox*s+K-1] * w[f, C-1, K-1, K-1] "
        "in every output. Margins: tolerance over the worst cuDNN error, least dropped-term "
        f"error over the tolerance. {time.time() - began:.0f} s.",
        "",
    ]
    table = ["| set | layer | dtype | layout | C*K*K | cuDNN | dropped | 1/sqrt(C*K*K) |"]
    table.append("|---|---|---|---|--:|--:|--:|--:|")
    for r in rows:
        table.append(
            f"| {r['set']} | {r['layer']} | {r['dtype']} | {r['layout']} | {r['terms']} "
            f"| {r['cudnn_error']} | {r['dropped_error']} | {r['one_over_sqrt_terms']} |"
        )
    text = "\n".join([*head, *summary(rows), "", *table, ""])
    (args.out / "tolerances.md").write_text(text)


if __name__ == "__main__":
    main()
