"""Compare the cubins of a family's kernel before and after a change of its source, with NVRTC.

    python -m tests.nvrtc.compare_cubins --base HEAD maxdnn sgemm ...
    python -m tests.nvrtc.compare_cubins --base BRANCH_POINT --dtype bf16 --dtype fp16 tc_wgmma

For each family: the kernel as git has it at --base against the working tree's (with whatever
headers it includes), compiled for sm_90 at SAMPLE random configurations spread over the
family's default shapes (in FP32 NCHW where the family computes it, else in a dtype and layout
of its own, or of --dtype), plus every best configuration the results database stores for it
(each timing protocol; only those of --dtype when given). Prints, per family, how many cubins are
byte-identical, how many differ only outside the code sections (.text.*), and lists the rest; a
pair that differs is compiled again without the cache first ("recompiled"), since NVRTC's output
is not always deterministic. A refactoring that moves code into a shared header should leave
every one identical. Needs NVRTC, no GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from autotune.families import get_family
from autotune.gpu import nvrtc_library
from autotune.gpu.compiler import CompileError, Compiler
from autotune.model.parsing import problem_from_dict
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config
from tests.nvrtc.cubin_text import code

REPO = Path(__file__).resolve().parents[2]
SAMPLE = 30
SHAPE_SETS = {"sgemm": ("alexnet_fc",), "winograd": ("vgg16", "alexnet")}


def precisions(family, dtypes: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The dtypes and layouts to sample in: those asked (else fp32, or the family's own where it
    does not compute fp32), in NCHW or else the family's own layouts."""
    own = tuple(getattr(family, "dtypes", ("fp32",)))
    layouts = tuple(getattr(family, "layouts", ("NCHW",)))
    if not dtypes:
        dtypes = ("fp32",) if "fp32" in own else own
    return dtypes, ("NCHW",) if "NCHW" in layouts else layouts


def stored_bests(database: Path, family: str) -> list[tuple[dict, str, str]]:
    """(shape, kind, config JSON) of the fastest OK evaluation per problem and protocol."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT shape, kind, config FROM (SELECT shape, kind, config, ROW_NUMBER() OVER ("
            " PARTITION BY device_id, problem_key, protocol ORDER BY time_ms, id) AS place"
            " FROM evaluations WHERE family = ? AND status = 'OK' AND time_ms IS NOT NULL)"
            " WHERE place = 1",
            (family,),
        ).fetchall()
    return [(json.loads(shape), kind, config) for shape, kind, config in rows]


def sampled(
    family_name: str, count: int, seed: int, dtypes: tuple[str, ...] = ()
) -> list[tuple[object, Config]]:
    family = get_family(family_name)
    # The 2D convolutions sample AlexNet's and OverFeat's layers; another kind, its own set.
    default = ("alexnet", "overfeat") if family.problem_type is ConvProblem else None
    sets = SHAPE_SETS.get(family_name, default or (family.default_shape_set,))
    problems = [p for s in sets for p in named_shapes(s)]
    dtypes, layouts = precisions(family, dtypes)
    if hasattr(problems[0], "dtype"):
        problems = [
            dataclasses.replace(p, dtype=d, layout=layout)
            for p in problems
            for d in dtypes
            for layout in layouts
        ]
    rng = random.Random(seed)
    space = family.load_space()
    out = []
    spaces = {}
    while len(out) < count:
        problem = rng.choice(problems)
        if problem not in spaces:
            spaces[problem] = space.bind(problem.fields(), ARCH_LIMITS["sm_90"]).configs
        if spaces[problem]:
            out.append((problem, rng.choice(spaces[problem])))
    return out


def compare(
    family_name: str,
    base: str,
    database: Path,
    count: int,
    seed: int,
    cache: Path | None,
    dtypes: tuple[str, ...] = (),
) -> dict:
    family = get_family(family_name)
    relative = family.source_path.relative_to(REPO)
    text = subprocess.run(
        ["git", "show", f"{base}:{relative.as_posix()}"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    cases = sampled(family_name, count, seed, dtypes)
    for shape, kind, config in stored_bests(database, family_name):
        problem = problem_from_dict(shape, kind)
        if dtypes and getattr(problem, "dtype", "fp32") not in dtypes:
            continue
        cases.append((problem, family.complete(Config.from_json(config))))
    build = Compiler(arch="sm_90", cache_dir=cache)
    tally = {
        "identical": 0,
        "same_code": 0,
        "recompiled": 0,
        "different": [],
        "base_refuses": [],
        "cases": len(cases),
    }
    with tempfile.TemporaryDirectory() as tmp:
        old_source = Path(tmp) / family.source_path.name
        old_source.write_text(text)
        for problem, config in cases:
            plan = family.plan(problem, config)
            try:
                old = build.compile_source(old_source, plan.defines, plan.arch_specific).cubin
            except CompileError:  # a stored config the base's kernel refuses (#error)
                tally["base_refuses"].append(f"{problem.key} {config}")
                continue
            new = build.compile_source(plan.source, plan.defines, plan.arch_specific).cubin
            if old != new and code(old) != code(new):
                # NVRTC is not always deterministic (a rare cubin differs between two compiles of
                # one source): compile both again, uncached, before calling them different.
                fresh = Compiler(arch="sm_90")
                old = fresh.compile_source(old_source, plan.defines, plan.arch_specific).cubin
                new = fresh.compile_source(plan.source, plan.defines, plan.arch_specific).cubin
                tally["recompiled"] += 1
            if old == new:
                tally["identical"] += 1
            elif code(old) == code(new):
                tally["same_code"] += 1
            else:
                tally["different"].append(f"{problem.key} {config}")
            print(family_name, problem.key, config, old == new, flush=True, file=sys.stderr)
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="+")
    parser.add_argument("--base", default="HEAD")
    parser.add_argument("--database", type=Path, default=REPO / "results" / "autotune.db")
    parser.add_argument("--sample", type=int, default=SAMPLE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, help="a cubin cache directory (reruns are faster)")
    parser.add_argument("--nvrtc-major", type=int, help="NVRTC of this CUDA major (12, 13)")
    parser.add_argument(
        "--dtype",
        action="append",
        default=[],
        help="sample problems in this dtype (repeatable; default fp32, or the family's own)",
    )
    args = parser.parse_args()
    if args.nvrtc_major is not None:
        nvrtc_library.cupy_cuda_major = lambda: args.nvrtc_major  # the major load_nvrtc() prefers
        print("NVRTC", nvrtc_library.nvrtc_version())
    for name in args.families:
        print(
            name,
            json.dumps(
                compare(
                    name,
                    args.base,
                    args.database,
                    args.sample,
                    args.seed,
                    args.cache,
                    tuple(args.dtype),
                )
            ),
        )


if __name__ == "__main__":
    main()
