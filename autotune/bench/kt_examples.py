"""`autotune bench kt-examples`: Kernel Tuner's CUDA examples as a peer test suite (issue 33).

Each in-scope example (autotune/data/kt_examples.toml says which, and why the others are not)
runs in a process of its own with a time limit, with only its imports of tune_kernel and
observers changed to autotune (kt_example_run.py), on the GPU, or with --synthetic against the
real GPU worker process holding a synthetic session (CPU only: that checks the mapping, not
speed). With --kernel-tuner the same script runs unchanged under Kernel Tuner, same strategy and
budget. The examples are not part of this repository: --examples (or AUTOTUNE_KT_EXAMPLES) names
Kernel Tuner's examples/cuda directory. One table, markdown and CSV, under
results/kernel_tuner_examples/ (kt_table.py makes it).
"""

from __future__ import annotations

import importlib.util
import json
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
from autotune.bench.kt_table import KT_VERSION, row, table_title, write_table

ENV = "AUTOTUNE_KT_EXAMPLES"
DEFAULT_OUTPUT = Path("results/kernel_tuner_examples")


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
