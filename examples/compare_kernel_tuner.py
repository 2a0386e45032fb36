#!/usr/bin/env python
"""Run an example script through autotune and through Kernel Tuner, same budget, and compare
evaluations per minute and best time.

    HOME=$(mktemp -d) python examples/compare_kernel_tuner.py OUTDIR \
        vector_add:brute_force convolution:random_sample:100

Each SCRIPT:STRATEGY[:MAX_FEVALS[:TIME_LIMIT_S]] runs examples/SCRIPT/SCRIPT.py twice: as
written (autotune) and with its import line changed to `from kernel_tuner import tune_kernel`
(the one change a Kernel Tuner user makes, in reverse). Only the tune_kernel call is timed (the
script's own set-up, its answer included, is not). A fresh HOME keeps both compilers' disk
caches cold; the results database is OUTDIR/autotune.db (the scripts write results/autotune.db
under the working directory, which is OUTDIR/work). Writes OUTDIR/tune_kernel.csv and .md.
"""

import csv
import importlib.util
import os
import sys
import time
from pathlib import Path

OURS = "from autotune import tune_kernel"
THEIRS = "from kernel_tuner import tune_kernel"
EXAMPLES = Path(__file__).resolve().parent


def load(script: Path, tool: str):
    text = script.read_text()
    if OURS not in text:
        raise SystemExit(f"{script} does not import tune_kernel from autotune")
    if tool == "kernel_tuner":
        text = text.replace(OURS, THEIRS)
    variant = script.with_name(f".{script.stem}_{tool}.py")  # beside it: __file__ stays valid
    variant.write_text(text)
    spec = importlib.util.spec_from_file_location(f"{script.stem}_{tool}", variant)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    variant.unlink()
    return module


def run(script: Path, tool: str, strategy: str, fevals: int | None, limit: float | None) -> dict:
    module = load(script, tool)
    inner = module.tune_kernel
    clock = {}

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            clock["s"] = time.perf_counter() - start

    module.tune_kernel = timed
    options = {"max_fevals": fevals} if fevals else {}
    if limit:
        options["time_limit"] = limit
    results, env = module.tune(strategy, options)
    ok = [r for r in results if isinstance(r.get("time"), float)]
    if tool == "autotune":
        ok = [r for r in ok if r.get("status") == "OK"]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    names = [k for k in (best or {}) if k not in _RESULT_KEYS]
    return {
        "script": script.stem,
        "tool": tool,
        "strategy": strategy,
        "max_fevals": fevals or "",
        "time_limit_s": limit or "",
        "evaluations": len(results),
        "valid": len(ok),
        "wall_s": round(clock["s"], 2),
        "evals_per_min": round(60 * len(results) / clock["s"], 1),
        "best_ms": round(best["time"], 5) if best else "",
        "best_config": " ".join(f"{k}={best[k]}" for k in names) if best else "",
        "device": env.get("device_name", ""),
        "tuning_s": round(env["tuning_s"], 2) if "tuning_s" in env else "",  # ours: the loop alone
    }


_RESULT_KEYS = {
    "time",
    "times",
    "compile_time",
    "verification_time",
    "benchmark_time",
    "strategy_time",
    "framework_time",
    "timestamp",
    "status",
    "error",
    "stored",
}


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    rows = []
    for item in sys.argv[2:]:
        name, strategy, *rest = item.split(":")
        fevals = int(rest[0]) if rest and rest[0] else None
        limit = float(rest[1]) if len(rest) > 1 else None
        script = EXAMPLES / name / f"{name}.py"
        for tool in ("kernel_tuner", "autotune"):
            try:
                row = run(script, tool, strategy, fevals, limit)
            except Exception as err:  # one tool failing still leaves the other's row
                row = {"script": name, "tool": tool, "strategy": strategy, "error": repr(err)}
            print(row, flush=True)
            rows.append(row)
    with open(out / "tune_kernel.csv", "w", newline="") as fh:
        fields = list(dict.fromkeys(k for r in rows for k in r))
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "| script | tool | strategy | max_fevals | evaluations | valid | wall s | "
        "evals/min | best ms | best config |",
        "|" + "---|" * 10,
    ]
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['script']} | {r['tool']} | {r['strategy']} | failed: {r['error']} |"
            )
            continue
        lines.append(
            f"| {r['script']} | {r['tool']} | {r['strategy']} | {r['max_fevals']} | "
            f"{r['evaluations']} | {r['valid']} | {r['wall_s']} | {r['evals_per_min']} | "
            f"{r['best_ms']} | {r['best_config']} |"
        )
    (out / "tune_kernel.md").write_text("\n".join(lines) + "\n")
    db = work / "results" / "autotune.db"
    if db.exists():
        db.replace(out / "autotune.db")


if __name__ == "__main__":
    main()
