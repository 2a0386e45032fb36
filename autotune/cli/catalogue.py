"""The commands that show what can be tuned: `families`, `shapes` and `space` (no GPU needed)."""

from __future__ import annotations

import time

import click

from autotune.cli.options import (
    SHAPE_METAVAR,
    fail,
    family_precisions,
    friendly_errors,
    kernels_option,
    precision_option,
    subspace_option,
)
from autotune.cli.values import StrictIntRange
from autotune.families import get_family, with_directories
from autotune.gpu.compiler import CompileError, Compiler
from autotune.model.parsing import parse_shape
from autotune.model.quoting import printable
from autotune.model.shapes import describe_shape_sets, in_precisions, named_shapes, shape_set_kinds
from autotune.model.space import ARCH_LIMITS


@click.command()
@kernels_option
@friendly_errors
def families(kernel_dirs) -> None:
    """List the kernel families with their sources and tunables."""
    for family in with_directories(kernel_dirs).values():
        space = family.load_space()
        click.echo(f"{family.name}: {printable(family.description)}")  # a kernel dir's TOML
        click.echo(f"    paper: {family.paper}; default shapes: {family.default_shape_set}")
        click.echo(f"    layout: {family.layout}; precision: {family.precision}")
        dtypes, layouts = family.dtypes, family.layouts
        if tuple(dtypes) != ("fp32",) or tuple(layouts) != ("NCHW",):
            click.echo(f"    computes: {'/'.join(dtypes)} in {'/'.join(layouts)}")
        tunables = ", ".join(f"{p.name} {list(p.values)}" for p in space.parameters)
        click.echo(f"    tunables: {tunables}")


@click.command()
@click.argument("name", required=False)
@friendly_errors
def shapes(name) -> None:
    """List the named shape sets, or the shapes of one set."""
    if name is None:
        kinds = shape_set_kinds()
        for set_name, description in describe_shape_sets().items():
            click.echo(
                f"{set_name}: {len(named_shapes(set_name))} shapes ({kinds[set_name]}); "
                f"{description}"
            )
        return
    for problem in named_shapes(name):
        click.echo(
            f"{problem.key}  ({problem.flops / 1e9:,.2f} GFLOP, "
            f"{problem.min_bytes / 1e6:,.1f} MB minimum)"
        )


@click.command()
@click.argument("family_name", metavar="FAMILY")
@click.option(
    "--shape",
    "shape_text",
    required=True,
    metavar=SHAPE_METAVAR,
    help="The problem the space is bound to.",
)
@click.option(
    "--arch",
    default="sm_90",
    show_default=True,
    type=click.Choice(sorted(ARCH_LIMITS)),
    help="Device limits to bind against (no GPU needed).",
)
@click.option(
    "--samples",
    type=StrictIntRange(0, 10_000),
    default=5,
    show_default=True,
    help="How many valid configurations to show.",
)
@click.option(
    "--compile",
    "do_compile",
    is_flag=True,
    help="Compile the samples with NVRTC and show their resource usage.",
)
@precision_option(
    "dtype",
    "The shape's dtype, unless it names one. Default: the family's first (fp32 where it "
    "computes fp32).",
)
@precision_option(
    "layout",
    "The shape's layout, unless it names one. Default: the family's first (NCHW where it reads "
    "NCHW).",
)
@subspace_option(
    "A TOML of pinned value lists per family, as `run --subspace` takes: the size and "
    "samples of FAMILY's space cut to its table's values."
)
@kernels_option
@friendly_errors
def space(
    family_name, shape_text, arch, samples, do_compile, dtype, layout, subspace, kernel_dirs
) -> None:
    """Size of a family's valid space for one shape, with sample configurations."""
    import random

    from autotune.replay.subspaces import load_pins, restrict

    family = get_family(family_name, with_directories(kernel_dirs))
    dtypes, layouts = family_precisions(
        family, (dtype,) if dtype else (), (layout,) if layout else ()
    )
    named = {part.partition("=")[0].strip() for part in shape_text.split(",")}
    problem = in_precisions([parse_shape(shape_text)], dtypes[:1], layouts[:1], named)[0]
    family.check(problem)
    search_space = family.load_space()
    cut = ""
    if subspace is not None:
        # A file without FAMILY's table would leave the whole space, as `run` tunes it.
        pins = load_pins(subspace).get(family.name)
        if not pins:
            fail(f"{subspace} pins nothing of {family.name}: it has no [{family.name}] table", 2)
        search_space = restrict(search_space, pins)
        cut = f" of the subspace {subspace.name}"
    fields = family.space_fields(problem)
    start = time.perf_counter()
    bound = search_space.bind(fields, ARCH_LIMITS[arch])
    took = time.perf_counter() - start
    click.echo(
        f"{family.name} {problem.key} on {arch}: {len(bound)} valid of "
        f"{search_space.cartesian_size} configurations{cut} (enumerated in {took * 1e3:.1f} ms)"
    )
    own = problem.fields()
    if fields != own:  # the kernels compute another layer for it (a rewrite)
        other = ", ".join(f"{k}={v}" for k, v in fields.items() if own.get(k) != v)
        click.echo(f"  configurations of the layer its kernels compute for it: {other}")
    if not len(bound):
        fail(f"{family.name} has no valid configuration at {problem.key} on {arch}", 2)
    picks = random.Random(0).sample(bound.configs, min(samples, len(bound)))
    compiler = Compiler(arch=arch) if do_compile else None
    failed = []
    for config in picks:
        line = f"  {config}"
        if compiler is not None:
            try:
                compiled = compiler.compile(family.plan(problem, config))
            except CompileError as err:  # a configuration's outcome, as `run` records it
                failed.append(compile_error_line(str(err)))
                line += f"  -> compile error: {failed[-1]}"
            else:
                line += (
                    f"  -> {compiled.max_registers} registers, {compiled.max_smem_bytes} B "
                    f"smem, {compiled.spills} B spilled, {compiled.compile_s:.2f} s"
                )
        click.echo(line)
    if failed:
        fail(f"{len(failed)} of {len(picks)} samples did not compile: {failed[0]}", 1)


def compile_error_line(log: str) -> str:
    """The line of NVRTC's log that says what is wrong (its first 'error'), short and escaped."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    said = next((line for line in lines if "error" in line), lines[0] if lines else "failed")
    return printable(said[:200])
