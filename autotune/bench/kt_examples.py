"""`autotune bench kt-examples`: Kernel Tuner's CUDA examples as a peer test suite (issue 33).

Each in-scope example (autotune/data/kt_examples.toml says which, and why the others are not)
runs in a process of its own with a time limit, with only its imports of tune_kernel and
observers changed to autotune (kt_example_run.py), on the GPU, or with --synthetic against the
real GPU worker process holding a synthetic session (CPU only: that checks the mapping, not
speed). With --kernel-tuner the same script runs unchanged under Kernel Tuner, same strategy and
budget. The examples are not part of this repository: --examples (or AUTOTUNE_KT_EXAMPLES) names
Kernel Tuner's examples/cuda directory. One table, markdown and CSV, under
results/kernel_tuner_examples/.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click

from autotune.cli.options import output_option, writing
from autotune.cli.values import MAX_SECONDS, StrictFloatRange, StrictIntRange

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from autotune import package_path

ENV = "AUTOTUNE_KT_EXAMPLES"
DEFAULT_OUTPUT = Path("results/kernel_tuner_examples")
KT_VERSION = "1.5.0"
COLUMNS = (
    "example",
    "status",
    "detail",
    "calls",
    "strategy",
    "evaluations",
    "best_ms",
    "wall_s",
    "tuning_s",
    "compile_s",
    "script_s",
    "kt_status",
    "kt_evaluations",
    "kt_best_ms",
    "kt_wall_s",
    "kt_script_s",
    "best_vs_kt",
    "wall_vs_kt",
    "lines_changed",
)
# Issue 33's targets beside Kernel Tuner on the same budget and strategy: each call's best time
# at most 1.05x Kernel Tuner's, the calls' wall time at most Kernel Tuner's.
BEST_TARGET = 1.05
WALL_TARGET = 1.0


@dataclass(frozen=True, slots=True)
class Example:
    name: str
    in_scope: bool
    needs: tuple[str, ...] = ()
    reason: str = ""
    fails: str = ""  # a known failure through autotune, and why


def classification() -> list[Example]:
    """Every example script of Kernel Tuner's examples/cuda, in or out of scope, in name order."""
    data = tomllib.loads(package_path("autotune", "data", "kt_examples.toml").read_text())
    out = []
    for name, entry in sorted(data["examples"].items()):
        out.append(
            Example(
                name,
                entry["scope"] == "in",
                tuple(entry.get("needs", ())),
                entry.get("reason", ""),
                entry.get("fails", ""),
            )
        )
    return out


def examples_dir(given: str | None) -> Path | None:
    """The examples directory from the option or the environment, None where neither names one."""
    text = given or os.environ.get(ENV)
    return Path(text).expanduser() if text else None


def run_example(
    example: Example,
    directory: Path,
    mode: str,
    timeout_s: float,
    max_fevals: int | None = None,
    kt_lang: str | None = None,
    log_dir: Path | None = None,
    caches: Path | None = None,
) -> dict:
    """One example in a scratch copy of the examples directory, in a subprocess: its report.
    Where the script itself needs the GPU (outside tune_kernel), the synthetic run skips it.
    `caches` holds each tool's compile cache across the examples of a suite (autotune's cubins,
    CuPy's kernel cache under Kernel Tuner), as a user's persists from one script to the next;
    without it each example starts with an empty one of its own."""
    if mode == "synthetic" and "gpu" in example.needs:
        return {"status": "skipped", "error": f"needs a GPU: {example.reason}", "calls": []}
    with tempfile.TemporaryDirectory(prefix="autotune-kt-example-") as scratch:
        work = Path(scratch)
        for f in directory.iterdir():  # the kernels and headers it reads; itself, to rewrite
            if f.name == example.name:
                shutil.copy(f, work / f.name)
            elif f.is_file() and f.suffix != ".py":
                (work / f.name).symlink_to(f.resolve())
        report = work / "report.json"
        command = [sys.executable, "-m", "autotune.bench.kt_example_run", example.name, mode]
        command += [str(report)]
        if max_fevals is not None:
            command += ["--max-fevals", str(max_fevals)]
        if kt_lang is not None and mode == "kt":
            command += ["--kt-lang", kt_lang]
        env = _env()
        if caches is not None and mode == "kt":
            env["CUPY_CACHE_DIR"] = str(caches / "cupy")
        elif caches is not None:
            command += ["--cubin-cache", str(caches / "autotune")]
        log = (log_dir or work) / f"{Path(example.name).stem}.{mode}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with log.open("w") as out:
            try:
                subprocess.run(
                    command,
                    cwd=work,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                    env=env,
                    start_new_session=True,
                )
            except subprocess.TimeoutExpired:
                return {
                    "status": "timeout",
                    "error": f"over the {timeout_s:g} s limit",
                    "calls": [],
                }
        if not report.exists():
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            return {"status": "failed", "error": f"the process ended: {tail[0]}", "calls": []}
        result = json.loads(report.read_text())
        result["process_s"] = time.perf_counter() - started
        return result


def _env() -> dict:
    """This process's environment, with autotune importable as it is here."""
    env = dict(os.environ)
    root = str(package_path("autotune").parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def row(example: Example, ours: dict, theirs: dict | None) -> dict:
    """The table's row: totals over the example's tune_kernel calls."""
    detail = ours.get("error", "")
    if ours["status"] == "failed" and example.fails:
        detail = f"{example.fails} ({detail})"
    out: dict = {"example": example.name, "status": ours["status"], "detail": detail}
    out.update(_totals(ours, ""))
    out.update(_script(ours, ""))
    out["strategy"] = ", ".join(dict.fromkeys(_strategy(c) for c in ours["calls"]))
    if theirs is not None:
        out["kt_status"] = theirs["status"]
        if theirs.get("error"):
            out["kt_status"] += f": {theirs['error']}"
        out.update(_totals(theirs, "kt_"))
        out.update(_script(theirs, "kt_"))
        out.update(_against(ours, theirs))
    out["lines_changed"] = ours.get("lines_changed", "")
    return out


def _against(ours: dict, theirs: dict) -> dict:
    """Where both tools ran the same calls: the worst call's best time against Kernel Tuner's
    (the calls in order, one kernel or size each) and the calls' wall time against its."""
    if ours["status"] != "ran" or theirs["status"] != "ran":
        return {}
    mine, kts = ours["calls"], theirs["calls"]
    out = {}
    if mine and len(mine) == len(kts):
        pairs = [(a.get("best_ms"), b.get("best_ms")) for a, b in zip(mine, kts, strict=True)]
        if all(_number(a) and _number(b) for a, b in pairs):
            out["best_vs_kt"] = round(max(a / b for a, b in pairs), 3)
    wall, kt_wall = sum(c["wall_s"] for c in mine), sum(c["wall_s"] for c in kts)
    if kt_wall > 0:
        out["wall_vs_kt"] = round(wall / kt_wall, 3)
    return out


def _number(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _script(report: dict, prefix: str) -> dict:
    """The process that ran the script, start to exit (the interpreter's start and every import,
    the harness's few included): about what the script's user waits for."""
    process_s = report.get("process_s")
    return {f"{prefix}script_s": round(process_s, 2)} if process_s is not None else {}


def _strategy(call: dict) -> str:
    if call.get("pinned") is not None:
        return f"{call['strategy']} (pinned {call['pinned']})"
    budget = call.get("max_fevals")
    return call["strategy"] + (f" ({budget})" if budget else "")


def _totals(report: dict, prefix: str) -> dict:
    calls = report["calls"]
    if not calls:
        return {}
    best = [c["best_ms"] for c in calls]
    return {
        f"{prefix}calls": len(calls),
        f"{prefix}evaluations": sum(c["evaluations"] for c in calls),
        # One best per call (several calls tune several kernels or sizes), slash-separated.
        f"{prefix}best_ms": " / ".join(_ms(b) for b in best[:3])
        + (" / ..." if len(best) > 3 else ""),
        f"{prefix}wall_s": round(sum(c["wall_s"] for c in calls), 2),
        **{
            f"{prefix}{key}": round(sum(c[key] for c in calls), 2)
            for key in ("tuning_s", "compile_s")
            if all(c.get(key) is not None for c in calls)
        },
    }


def _ms(value: float) -> str:
    return (
        "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"
    )


def write_table(rows: list[dict], excluded: list[Example], path: Path, title: list[str]) -> None:
    """`path`.csv and `path`.md: the rows, the totals, and the examples out of scope."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    ran = counts.get("ran", 0)
    lines = [*title, ""]
    others = "".join(f"; {k}: {v}" for k, v in sorted(counts.items()) if k != "ran")
    share = 100 * ran / max(1, len(rows))
    lines.append(
        f"In scope: {len(rows)}; ran: {ran} ({share:.0f}%){others}. Out of scope: {len(excluded)}."
    )
    lines += _against_totals(rows)
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [str(r.get(c, "")).replace("|", "\\|").replace("\n", " ") for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Out of scope", "", "| example | why |", "|---|---|"]
    lines += [f"| {e.name} | {e.reason} |" for e in excluded]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def _against_totals(rows: list[dict]) -> list[str]:
    """The targets' counts over the rows both tools ran (best_vs_kt, wall_vs_kt)."""
    best = [float(r["best_vs_kt"]) for r in rows if r.get("best_vs_kt") not in (None, "")]
    wall = [float(r["wall_vs_kt"]) for r in rows if r.get("wall_vs_kt") not in (None, "")]
    if not best and not wall:
        return []
    return [
        "",
        f"Beside Kernel Tuner (best_vs_kt: the worst call's best time over Kernel Tuner's; "
        f"wall_vs_kt: the calls' wall time over Kernel Tuner's): best at most {BEST_TARGET:g}x "
        f"on {sum(b <= BEST_TARGET for b in best)} of {len(best)}, wall at most "
        f"{WALL_TARGET:g}x on {sum(w <= WALL_TARGET for w in wall)} of {len(wall)}.",
    ]


@click.command("kt-examples")
@click.option(
    "--examples",
    "examples",
    help=f"Kernel Tuner's examples/cuda directory (default: ${ENV}).",
)
@click.option(
    "--synthetic", is_flag=True, help="CPU only: the GPU worker holds a synthetic session."
)
@click.option(
    "--kernel-tuner",
    "with_kt",
    is_flag=True,
    help=f"Also run each script unchanged under Kernel Tuner (kernel_tuner=={KT_VERSION}).",
)
@click.option("--only", multiple=True, help="Run only these examples (file names; repeatable).")
@click.option(
    "--timeout",
    "timeout_s",
    type=StrictFloatRange(min=1, max=MAX_SECONDS),
    default=600.0,
    show_default=True,
    help="Seconds per run.",
)
@click.option(
    "--max-fevals",
    type=StrictIntRange(1, 1_000_000),
    help="A budget for every call, for both tools: where a script brute-forces, both brute-force "
    "the same N configurations (drawn once, seeded); other strategies get max_fevals N.",
)
@click.option(
    "--kt-lang",
    type=click.Choice(["cupy", "nvcuda"]),
    help="With --kernel-tuner: Kernel Tuner's backend in place of PyCUDA (where a script says "
    "lang None or 'CUDA').",
)
@output_option(
    "Directory of the table (.csv and .md) and of Kernel Tuner's logs (logs/).",
    directory=True,
    default=DEFAULT_OUTPUT,
)
def kt_examples(examples, synthetic, with_kt, only, timeout_s, max_fevals, kt_lang, output) -> None:
    """Kernel Tuner's CUDA examples through `from autotune import tune_kernel`."""
    if kt_lang is not None and not with_kt:
        raise click.UsageError("--kt-lang chooses Kernel Tuner's backend: add --kernel-tuner")
    directory = examples_dir(examples)
    if directory is None or not directory.is_dir():
        raise click.ClickException(
            f"no examples directory: pass --examples or set {ENV} to Kernel Tuner's examples/cuda"
        )
    every = classification()
    known = {e.name for e in every}
    unknown = sorted(set(only) - known)
    if unknown:
        raise click.ClickException(f"not one of Kernel Tuner's examples: {', '.join(unknown)}")
    missing = sorted(e.name for e in every if not (directory / e.name).is_file())
    if missing:
        raise click.ClickException(f"{directory} lacks {', '.join(missing)}: not examples/cuda?")
    if with_kt and synthetic:
        raise click.ClickException("--kernel-tuner needs the GPU; leave out --synthetic")
    if with_kt and importlib.util.find_spec("kernel_tuner") is None:
        raise click.ClickException(
            f"--kernel-tuner: Kernel Tuner is not installed (kernel_tuner=={KT_VERSION})"
        )
    with writing("--output", output):  # before the examples, not after the first of them
        output.mkdir(parents=True, exist_ok=True)
    mode = "synthetic" if synthetic else "ours"
    chosen = [e for e in every if e.in_scope and (not only or e.name in only)]
    stem = "synthetic" if synthetic else "gpu"
    title = table_title(synthetic, with_kt, timeout_s, max_fevals, kt_lang)
    excluded = [e for e in every if not e.in_scope]
    rows = []
    logs = output / "logs"
    with tempfile.TemporaryDirectory(prefix="autotune-kt-caches-") as scratch:
        caches = Path(scratch)
        for example in chosen:
            click.echo(f"{example.name}: ", nl=False)
            ours = run_example(
                example, directory, mode, timeout_s, max_fevals, log_dir=logs, caches=caches
            )
            theirs = None
            if with_kt:
                theirs = run_example(
                    example, directory, "kt", timeout_s, max_fevals, kt_lang, logs, caches
                )
            rows.append(row(example, ours, theirs))
            click.echo(f"{ours['status']} {ours.get('error', '')}".strip())
            # Written after every example, so a run stopped part-way keeps what it measured.
            write_table(rows, excluded, output / stem, title)
    click.echo(f"wrote {output / stem}.md and .csv")


def table_title(synthetic: bool, with_kt: bool, timeout_s: float, max_fevals, kt_lang) -> list[str]:
    stem = "synthetic" if synthetic else "gpu"
    title = [f"# Kernel Tuner's CUDA examples through autotune ({stem})", ""]
    if synthetic:
        title.append(
            "The synthetic worker: the real GPU worker process with a synthetic session inside "
            "(CPU only). Times are not timings: this checks that each script runs through "
            "tune_kernel's mapping, the worker and the tuner."
        )
    else:
        title.append(
            f"On the GPU; Kernel Tuner {KT_VERSION} beside it: {'yes' if with_kt else 'no'}."
        )
    budget = (
        f"{max_fevals} configurations per call: where a script brute-forces, the same "
        f"{max_fevals} for both tools (drawn once with seed 0 from the call's space, "
        "brute-forced: 'pinned'), else max_fevals"
        if max_fevals
        else "each script's own"
    )
    title.append(
        f"Budget: {budget}; time limit {timeout_s:g} s per run. Command: "
        f"`autotune bench kt-examples{' --synthetic' if synthetic else ''}"
        f"{' --kernel-tuner' if with_kt else ''}"
        f"{f' --kt-lang {kt_lang}' if with_kt and kt_lang else ''}"
        f"{f' --max-fevals {max_fevals}' if max_fevals else ''} --timeout {timeout_s:g}`."
    )
    title.append(
        "wall_s: the tune_kernel calls, start to return; tuning_s: of which the tuner ran "
        "(the rest: the GPU's opening, the store, the arguments); compile_s: NVRTC's "
        "compiles, summed over the compile pool; script_s: the process that ran the script, start "
        "to exit (every import included). Each tool's compile cache starts empty and lasts the "
        "suite's run (autotune's cubins; CuPy's kernel cache under Kernel Tuner), as a user's "
        "lasts from one script to the next."
    )
    return title
