"""The commands that show what can be tuned: `families`, `shapes` and `space` (no GPU needed)."""

from __future__ import annotations

import time

import click

from autotune.cli.options import SHAPE_METAVAR, fail, friendly_errors, kernels_option
from autotune.families import get_family, with_directories
from autotune.gpu.compiler import Compiler
from autotune.model.parsing import parse_shape
from autotune.model.shapes import describe_shape_sets, named_shapes, shape_set_kinds
from autotune.model.space import ARCH_LIMITS


@click.command()
@kernels_option
@friendly_errors
def families(kernel_dirs) -> None:
    """List the kernel families with their sources and tunables."""
    for family in with_directories(kernel_dirs).values():
        space = family.load_space()
        click.echo(f"{family.name}: {family.description}")
        click.echo(f"    paper: {family.paper}; default shapes: {family.default_shape_set}")
        click.echo(f"    layout: {family.layout}; precision: {family.precision}")
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
    type=click.IntRange(min=0),
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
@kernels_option
@friendly_errors
def space(family_name, shape_text, arch, samples, do_compile, kernel_dirs) -> None:
    """Size of a family's valid space for one shape, with sample configurations."""
    import random

    family = get_family(family_name, with_directories(kernel_dirs))
    problem = parse_shape(shape_text)
    family.check(problem)
    search_space = family.load_space()
    start = time.perf_counter()
    bound = search_space.bind(problem.fields(), ARCH_LIMITS[arch])
    took = time.perf_counter() - start
    click.echo(
        f"{family.name} {problem.key} on {arch}: {len(bound)} valid of "
        f"{search_space.cartesian_size} configurations (enumerated in {took * 1e3:.1f} ms)"
    )
    if not len(bound):
        fail(f"{family.name} has no valid configuration at {problem.key} on {arch}", 2)
    picks = random.Random(0).sample(bound.configs, min(samples, len(bound)))
    compiler = Compiler(arch=arch) if do_compile else None
    for config in picks:
        line = f"  {config}"
        if compiler is not None:
            compiled = compiler.compile(family.plan(problem, config))
            line += (
                f"  -> {compiled.max_registers} registers, {compiled.max_smem_bytes} B smem, "
                f"{compiled.spills} B spilled, {compiled.compile_s:.2f} s"
            )
        click.echo(line)
