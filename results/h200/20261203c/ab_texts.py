"""Two texts of tc_wgmma, the same configurations: each configuration compiled from the
family's kernel and from --baseline-source (an earlier commit's text), and timed as protocol 2
times (the L2 flushed before each sample, every second sample twice), the two texts' launches
taking turns, the median of --runs each. For a change that no tunable names (how the outputs of
a fused epilogue are staged, say), whose effect the store cannot show. Prints a Markdown row a
configuration.

    python3 results/h200/20261203c/ab_texts.py --baseline-source .before/tc_wgmma.cu \
        --shape N=28,K=1,C=512,F=256,B=32,epilogue=bias_relu --dtype bf16 \
        --config '{"BM":128,...}' [--config ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "20261203b"))
sys.path.insert(0, str(HERE.parent / "20261201"))
from timeline import plain_ms  # noqa: E402  (session 79's: both texts' medians, in turns)

from autotune.families import get_family  # noqa: E402
from autotune.gpu.compiler import Compiler  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402
from autotune.model.problem import ConvProblem  # noqa: E402
from autotune.model.space import Config  # noqa: E402


def problem_of(shape: str, dtype: str) -> ConvProblem:
    """N=..,K=..,...[,epilogue=NAME]: the integer fields and the epilogue's name."""
    fields = dict(kv.split("=") for kv in shape.split(","))
    epilogue = fields.pop("epilogue", None)
    ints = {k: int(v) for k, v in fields.items()}
    return ConvProblem(**ints, dtype=dtype, layout="NHWC", epilogue=epilogue)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--config", action="append", required=True, help="JSON of the tunables")
    ap.add_argument("--baseline-source", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    family = get_family("tc_wgmma")
    problem = problem_of(args.shape, args.dtype)
    session = GpuSession(0)
    sm_count = session.info().sm_count
    compiler = Compiler(arch="sm_90")
    with tempfile.TemporaryDirectory(dir=family.source_path.parent) as tmp:
        # Beside the original, so that its headers resolve.
        baseline = Path(tmp).parent / f".{Path(tmp).name}_tc_wgmma_baseline.cu"
        baseline.write_text(args.baseline_source.read_text())
        try:
            for text in args.config:
                config = family.complete(Config.from_json(text))
                plan = family.plan(problem, config)
                launches = tuple(
                    dataclasses.replace(lc, grid=lc.grid_on(sm_count)) for lc in plan.launches
                )
                this, before = plain_ms(
                    family, problem, config, session, compiler, tmp, launches, (None, baseline),
                    runs=args.runs,
                )  # fmt: skip
                keys = ("BM", "BN", "WG", "STAGES", "PINGPONG", "PERSISTENT", "STAGING")
                label = " ".join(f"{k}={config[k]}" for k in keys)
                print(
                    f"| {problem.key} | {label} | {before * 1000:.2f} | {this * 1000:.2f} | "
                    f"{(this / before - 1) * 100:+.1f}% |",
                    flush=True,
                )
        finally:
            baseline.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
