"""One Kernel Tuner example script, run in a process of its own for `autotune bench kt-examples`:
with its imports of tune_kernel, run_kernel, observers and file helpers changed to autotune
(ours, on the GPU or against the synthetic worker), or unchanged under Kernel Tuner (theirs). Every
tune_kernel call is timed and counted; the outcome goes to a JSON report. Run as
`python -m autotune.bench.kt_example_run SCRIPT MODE REPORT [--max-fevals N] [--kt-lang L]`
from a scratch directory holding the example's files (the script reads and writes there).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import runpy
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("ours", "synthetic", "kt")
SYNTHETIC_SESSION = "autotune.gpu.synthetic:SyntheticSession"

_FROM = re.compile(r"^(\s*)from\s+kernel_tuner((?:\.\w+)*)\s+import\s+([^()#]+?)\s*(#.*)?$")
_IMPORT = re.compile(r"^(\s*)import\s+kernel_tuner\s*(#.*)?$")


@dataclass(frozen=True, slots=True)
class Rewritten:
    """A script with its Kernel Tuner imports of tune_kernel and observers changed to autotune."""

    text: str
    changed: int  # lines changed
    autotune_names: tuple[str, ...]  # what the script now takes from autotune
    kernel_tuner_left: tuple[str, ...] = field(default=())  # what it still takes from Kernel Tuner


# Kernel Tuner's entry points and its file helpers for tune_kernel's results, which autotune
# has too.
ENTRY_POINTS = ("tune_kernel", "run_kernel")
FILE_HELPERS = ("store_output_file", "store_metadata_file")


def _moves(module: str, name: str) -> bool:
    """Whether `from kernel_tuner<module> import name` is one to change: tune_kernel and
    run_kernel from the package, the file helpers for its results from kernel_tuner.file_utils,
    an observer class from anywhere in it but kernel_tuner.accuracy: an output observer
    (AccuracyObserver) is the caller's code, which tune_kernel calls in the caller's process,
    so Kernel Tuner's own is used, as its TunablePrecision beside it."""
    if module == "" and name in ENTRY_POINTS:
        return True
    if module == ".file_utils" and name in FILE_HELPERS:
        return True
    return name.endswith("Observer") and module != ".accuracy"


def rewrite(text: str) -> Rewritten:
    lines = text.split("\n")
    # What the script reaches through the module (`kernel_tuner.x`), its `from` imports left out:
    # those are handled below, name by name.
    used = "\n".join(line for line in lines if not _FROM.match(line))
    other_uses = sorted(
        {m for m in re.findall(r"\bkernel_tuner\.(\w+)", used) if m not in ENTRY_POINTS}
    )
    out, changed, moved, left = [], 0, [], []
    for line in lines:
        new = line
        if m := _FROM.match(line):
            indent, module, names = m.group(1), m.group(2), m.group(3)
            parts = [p.strip() for p in names.split(",") if p.strip()]
            to_us = [p for p in parts if _moves(module, p.split()[0])]
            stay = [p for p in parts if p not in to_us]
            if to_us:
                new_lines = [f"{indent}from autotune import {', '.join(to_us)}"]
                if stay:
                    new_lines.append(f"{indent}from kernel_tuner{module} import {', '.join(stay)}")
                new = "\n".join(new_lines)
                moved += [p.split()[0] for p in to_us]
            left += [f"kernel_tuner{module}.{p.split()[0]}" for p in stay]
        elif m := _IMPORT.match(line):
            # Kept beside autotune where the script uses more of Kernel Tuner than its entry
            # points.
            indent = m.group(1)
            new = (
                f"{indent}import kernel_tuner, autotune"
                if other_uses
                else f"{indent}import autotune"
            )
            left += [f"kernel_tuner.{u}" for u in other_uses]
        for entry in ENTRY_POINTS:
            if f"kernel_tuner.{entry}" in new:
                new = new.replace(f"kernel_tuner.{entry}", f"autotune.{entry}")
                moved.append(entry)
        changed += new != line
        out.append(new)
    return Rewritten(
        "\n".join(out), changed, tuple(dict.fromkeys(moved)), tuple(dict.fromkeys(left))
    )


# The seed of the configurations a budget pins (pinned_sample): the same for both tools and
# every run, so that a table's two best times are of the same configurations.
PIN_SEED = 0
RESTRICTIONS_AT = 3  # restrictions' place among tune_kernel's arguments after tune_params


class Calls:
    """Every tune_kernel call of the script: what was asked, how long it took, what came back."""

    def __init__(self, max_fevals: int | None) -> None:
        self.max_fevals = max_fevals
        self.rows: list[dict] = []

    def wrap(self, tune_kernel, **ours):
        def call(kernel_name, kernel_source, problem_size, arguments, tune_params, *args, **kw):
            strategy = kw.get("strategy")
            pinned = None
            if self.max_fevals is not None and strategy in (None, "brute_force"):
                # A budget on a brute-force script: the same configurations for both tools,
                # brute-forced, rather than a random sample of each tool's own drawing (two
                # draws of 20 among 1,080 made best times differ by 1.5x either way).
                args = list(args)
                given = args[RESTRICTIONS_AT] if len(args) > RESTRICTIONS_AT else None
                given = kw.pop("restrictions", given)
                names = kw.get("block_size_names")
                pinned = pinned_sample(tune_params, given, names, self.max_fevals, PIN_SEED)
                if len(args) > RESTRICTIONS_AT:
                    args[RESTRICTIONS_AT] = pinned
                else:
                    kw["restrictions"] = pinned
                strategy = kw["strategy"] = "brute_force"
            elif self.max_fevals is not None:
                options = dict(kw.get("strategy_options") or {})
                options.setdefault("max_fevals", self.max_fevals)
                kw["strategy_options"] = options
            for k, v in ours.items():
                kw.setdefault(k, v() if callable(v) else v)
            name = getattr(strategy, "__name__", strategy) or "brute_force"
            started = time.perf_counter()
            results, env = tune_kernel(
                kernel_name, kernel_source, problem_size, arguments, tune_params, *args, **kw
            )
            times = [
                r["time"]
                for r in results
                if "__error__" not in r and isinstance(r.get("time"), float)
            ]
            self.rows.append(
                {
                    "kernel": kernel_name,
                    "strategy": str(name).rpartition(".")[2],
                    "max_fevals": (kw.get("strategy_options") or {}).get("max_fevals"),
                    "pinned": len(pinned.configurations) if pinned is not None else None,
                    "evaluations": len(results),
                    "valid": len(times),
                    "best_ms": min(times) if times else math.nan,
                    "first_error": next((str(r["error"]) for r in results if r.get("error")), ""),
                    "wall_s": time.perf_counter() - started,
                    # Where ours went (Kernel Tuner's env has neither): the tuner's run, and
                    # NVRTC's compiles within it (summed over a pool, so they may exceed it).
                    "tuning_s": env.get("tuning_s"),
                    "compile_s": _seconds(env.get("total_compile_time")),
                }
            )
            return results, env

        return call


def pinned_sample(tune_params, restrictions, block_size_names, count: int, seed: int):
    """`count` configurations of the call's space (its restrictions and at most 1,024 threads a
    block, as both tools apply them), drawn with `seed` so that every run and both tools get
    the same ones, as the restriction that admits only them (its `configurations`: the tuples
    of the tunables' values in tune_params' order).

    The restriction is a plain function of `*values`, which both of Kernel Tuner's forms call:
    with the tunables' dict where it is the only restriction, with the tunables by position
    where a tool adds one of its own beside it. Kernel Tuner 1.5 reads a restriction's source
    to turn lambdas into text, and refuses a callable object, so it is neither."""
    import random

    from autotune.kt.arguments import check_request
    from autotune.kt.space import bind_space
    from autotune.model.space import DeviceLimits

    request = check_request(
        {
            "kernel_name": "pinned",
            "kernel_source": "",
            "problem_size": 1,
            "arguments": [],
            "tune_params": tune_params,
            "restrictions": restrictions,
            "block_size_names": block_size_names,
        }
    )
    names = list(request.tune_params)
    space = bind_space(request, DeviceLimits())
    every = [tuple(c.as_dict()[n] for n in names) for c in space]
    chosen = set(random.Random(seed).sample(every, min(count, len(every))))

    def pinned(*values) -> bool:
        # NumPy scalars hash and compare as the Python values a Config holds.
        if len(values) == 1 and isinstance(values[0], dict):
            values = tuple(values[0][n] for n in names)
        return values in chosen

    pinned.configurations = chosen
    return pinned


def _seconds(ms) -> float | None:
    return ms / 1e3 if isinstance(ms, int | float) and not isinstance(ms, bool) else None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".strip()


def run(
    script: Path,
    mode: str,
    max_fevals: int | None,
    kt_lang: str | None,
    cubin_cache: Path | None = None,
) -> dict:
    """Run the script here (the current directory is its scratch copy); the report's dict."""
    report: dict = {"example": script.name, "mode": mode, "calls": []}
    text = script.read_text()
    if mode != "kt":
        rewritten = rewrite(text)
        report["lines_changed"] = rewritten.changed
        missing = [n for n in rewritten.autotune_names if not _autotune_has(n)]
        if missing:
            report["status"] = "unsupported"
            report["error"] = f"autotune has no {', '.join(missing)} yet"
            return report
        if rewritten.kernel_tuner_left and not _kernel_tuner():
            report["status"] = "skipped"
            report["error"] = (
                f"needs Kernel Tuner installed for {', '.join(rewritten.kernel_tuner_left)}"
            )
            return report
        text = rewritten.text
        script = script.with_name(f"{script.stem}_autotune.py")
        script.write_text(text)
    calls = Calls(max_fevals)
    _install(calls, mode, kt_lang, cubin_cache)
    sys.argv = [str(script)]
    sys.path.insert(0, str(script.parent))
    try:
        _strategy_modules(text)
        runpy.run_path(str(script), run_name="__main__")
        report["status"] = "ran"
        empty = next((c for c in calls.rows if not c["valid"]), None)
        if empty is not None:  # it ran, but nothing it tuned compiled or ran
            report["status"] = "failed"
            why = empty["first_error"].strip().splitlines()
            report["error"] = f"no valid configuration of {empty['kernel']}" + (
                f": {why[0][:300]}" if why else ""
            )
    except BaseException as err:  # the script's own failure is the report's
        from autotune.kt.arguments import TuneKernelError

        missing = _missing_module(err) if not calls.rows else None
        if missing:  # a package of the script's own (spmv.py's scipy), not either tool's
            report["status"] = "skipped"
            report["error"] = f"needs {missing}, which is not installed"
            return report
        unsupported = isinstance(err, TuneKernelError)
        report["status"] = "unsupported" if unsupported else "failed"
        report["error"] = (
            str(err).removeprefix("tune_kernel: ") if unsupported else _first_line(err)
        )
        if not unsupported:
            traceback.print_exc()
    finally:
        report["calls"] = calls.rows
        _close()
    return report


def _missing_module(err: BaseException) -> str | None:
    """The top-level package a script imports and this Python lacks, unless it is one of the
    tools (then the failure is theirs to report)."""
    if not isinstance(err, ModuleNotFoundError) or not err.name:
        return None
    top = err.name.partition(".")[0]
    return None if top in ("autotune", "kernel_tuner") else top


def _strategy_modules(text: str) -> None:
    """Import the Kernel Tuner strategy modules a script names as attributes: Kernel Tuner 1.4
    (the examples' release) imported them with the package, 1.5 loads them by name only. Done
    for both tools alike."""
    import importlib

    for name in sorted(set(re.findall(r"\bkernel_tuner\.strategies\.(\w+)", text))):
        importlib.import_module(f"kernel_tuner.strategies.{name}")


def _autotune_has(name: str) -> bool:
    import autotune

    try:
        getattr(autotune, name)
    except AttributeError:
        return False
    return True


def _kernel_tuner() -> bool:
    import importlib.util

    return importlib.util.find_spec("kernel_tuner") is not None


_OPEN: list = []


def _install(calls: Calls, mode: str, kt_lang: str | None, cubin_cache: Path | None) -> None:
    if mode == "kt":
        import kernel_tuner
        import kernel_tuner.interface

        wrapped = calls.wrap(kernel_tuner.tune_kernel)
        if kt_lang is not None:  # in place of PyCUDA (lang None or "CUDA"), which may be missing
            inner = wrapped

            def wrapped(*args, **kw):
                if str(kw.get("lang") or "cuda").lower() == "cuda":
                    kw["lang"] = kt_lang
                return inner(*args, **kw)

        kernel_tuner.tune_kernel = kernel_tuner.interface.tune_kernel = wrapped
        return
    import autotune
    import autotune.kt.api as api

    scratch = Path.cwd() / ".autotune"
    api.CACHE_ROOT = scratch / "cache"  # the arguments' files stay in the scratch directory
    ours: dict = {"storage": str(scratch / "results.db")}
    ours["compiler_cache"] = cubin_cache or scratch / "cubins"
    if mode == "synthetic":
        ours["evaluator"] = _synthetic_worker
    scratch.mkdir(exist_ok=True)
    autotune.tune_kernel = calls.wrap(api.tune_kernel, **ours)


def _synthetic_worker():
    """One real GPU worker process per script, with the synthetic session in it."""
    if not _OPEN:
        from autotune.gpu.evaluator import GpuEvaluator

        _OPEN.append(GpuEvaluator(session=SYNTHETIC_SESSION))
    return _OPEN[0]


def _close() -> None:
    while _OPEN:
        _OPEN.pop().close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", type=Path)
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("report", type=Path)
    parser.add_argument("--max-fevals", type=int)
    parser.add_argument("--kt-lang")
    parser.add_argument("--cubin-cache", type=Path, help="autotune's cubin cache (kept)")
    a = parser.parse_args(argv)
    report = run(a.script.resolve(), a.mode, a.max_fevals, a.kt_lang, a.cubin_cache)
    a.report.write_text(json.dumps(report, default=str))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
