"""The contract every registered family keeps, checked the same way for all of them (DESIGN
section 6): registered under its name with its kind, shape set and tunables (one table here,
where each family's test file used to restate its own), three files sharing its name with its
tunables spelled the same in the .cu and the .toml, problems of another kind refused, a space that
binds on every shape of its own shape set, and only configurations that can launch."""

from __future__ import annotations

import dataclasses
import inspect
import random
import re
from pathlib import Path

import pytest

from autotune.cli.options import family_precisions
from autotune.families import FAMILIES, UnsupportedProblem, get_family
from autotune.families.files import KERNEL_DIR, SPACE_DIR
from autotune.model.problem import Conv3dProblem, ConvProblem, GemmProblem
from autotune.model.shapes import in_precisions, named_shapes, shape_set_names
from autotune.model.space import ARCH_LIMITS

LIMITS = ARCH_LIMITS["sm_90"]
# CUDA's limits on a launch (compute capability 9.0): block dimensions and grid dimensions.
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
SAMPLES = 300  # configurations planned per shape: spaces run to 10^5 points

FAMILY_NAMES = sorted(FAMILIES)

# Per family: the kind of problem it computes, its default shape set and its tunables. A family
# added to the registry must be added here too (the first test below says so).
FACTS: dict[str, tuple[type, str, str]] = {
    "chen_general": (ConvProblem, "general", "W H FTB WT FT CSH VEC CSPLIT PREFETCH"),
    "chen_special": (ConvProblem, "special", "W H VEC"),
    "conv3d": (
        Conv3dProblem,
        "conv3d",
        "TILE_X TILE_Y TILE_Z COARSEN COARSEN_AXIS USE_SMEM VEC Z_STEPS RING",
    ),
    "direct_naive": (ConvProblem, "general", "BLOCK_X BLOCK_Y FILTER_IN_CONST"),
    "im2col_gemm": (ConvProblem, "general", "BM BN BK TM TN VEC UNROLL_BLOCK"),
    "implicit_gemm": (
        ConvProblem,
        "general",
        "BM BN BK TM TN VEC DOUBLE_BUFFER SPLIT_K OFFSET_TABLE GATHER_ROWS",
    ),
    "maxdnn": (
        ConvProblem,
        "alexnet",
        "BM BN BK TM TN DOUBLE_BUFFER VEC MIN_BLOCKS SPLIT_K FMA_ORDER BYTE_OFFSETS "
        "REG_USAGE_LEVEL",
    ),
    "sgemm": (
        GemmProblem,
        "alexnet_fc",
        "BM BN BK TM TN VEC DOUBLE_BUFFER WARP_TX MIN_BLOCKS SPLIT_K",
    ),
    "smem_channels": (
        ConvProblem,
        "general",
        "TILE_W TILE_H THREADS_Y CH_PER_BLOCK CH_STAGE FILTERS_PER_BLOCK FILTER_IN_SMEM",
    ),
    "tc_implicit_gemm": (
        ConvProblem,
        "alexnet",
        "BM BN BK WM WN STAGES SWIZZLE SPLIT_K GATHER MIN_BLOCKS FRAG_DB RASTER TF32_ROUND",
    ),
    "tc_wgmma": (
        ConvProblem,
        "alexnet",
        "BM BN WG STAGES SPLIT_K PRODUCER C_OUTER L1_CACHE TILES_PER_BLOCK TMA STORE_TMA GEMM_1X1 "
        "STAGING PINGPONG PERSISTENT STREAM_K MULTICAST MULTICAST_BLOCKS SPLIT_CLUSTER STEP_BYTES "
        "FILTERS_M",
    ),
    "tiled2d": (
        ConvProblem,
        "tiled2d",
        "BLOCK_SIZE_X BLOCK_SIZE_Y TILE_SIZE_X TILE_SIZE_Y USE_PADDING READ_ONLY",
    ),
    "winograd": (
        ConvProblem,
        "vgg16",
        "OUT_TILE BM BN BK TM TN DOUBLE_BUFFER VEC MIN_BLOCKS IN_BLOCK OUT_BLOCK OUT_STAGE",
    ),
}
# One small problem of each kind, to hand a family a kind it does not compute.
ONE_OF_EACH_KIND = (
    ConvProblem(N=8, K=3, C=1, F=1),
    GemmProblem(M=8, N=8, K=8),
    Conv3dProblem(D=8, R=8, Cc=8, Kd=3, Kr=3, Kc=3),
)


def _launches(plan):
    return (*plan.setup, *plan.launches, *plan.finish)


def test_every_registered_family_has_its_facts_here() -> None:
    assert set(FACTS) == set(FAMILIES)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_registered_with_its_kind_shape_set_and_tunables(name: str) -> None:
    family = FAMILIES[name]
    kind, shape_set, tunables = FACTS[name]
    assert get_family(name) is family and family.name == name
    assert family.problem_type is kind
    assert family.default_shape_set == shape_set and shape_set in shape_set_names()
    assert set(family.load_space().names) == set(tunables.split())


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_problems_of_another_kind_are_refused(name: str) -> None:
    family = FAMILIES[name]
    others = [p for p in ONE_OF_EACH_KIND if not isinstance(p, family.problem_type)]
    assert len(others) == len(ONE_OF_EACH_KIND) - 1
    for problem in others:
        with pytest.raises(UnsupportedProblem):
            family.check(problem)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_three_files_share_the_name_and_the_tunables(name: str) -> None:
    family = FAMILIES[name]
    assert family.source_path.is_file() and family.space_path.is_file()
    # The module in autotune/families/, its kernel in kernels/, its space in search_spaces/.
    module = Path(inspect.getfile(type(family)))
    assert module.name == f"{name}.py" and module.parent.name == "families"
    assert family.source_path == KERNEL_DIR / f"{name}.cu"
    assert family.space_path == SPACE_DIR / f"{name}.toml"
    source = family.source_path.read_text()
    identifiers = set(re.findall(r"\b[A-Z][A-Z0-9_]*\b", source))
    names = family.load_space().names
    missing = [n for n in names if n not in identifiers and n not in family.launch_tunables]
    assert not missing, f"{name}: tunables not used in {family.source_path.name}: {missing}"
    # A launch tunable is one of the space's, and the kernel never reads it.
    assert set(family.launch_tunables) <= set(names) - identifiers, family.launch_tunables


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_every_shape_of_its_own_set_binds_and_every_config_launches(name: str) -> None:
    family = FAMILIES[name]
    rng = random.Random(name)
    # In the dtypes and layouts the family is tuned in (a tensor-core family's own, not fp32).
    own = in_precisions(named_shapes(family.default_shape_set), *family_precisions(family))
    for problem in own:
        family.check(problem)
        space = family.load_space().bind(problem.fields(), LIMITS)
        assert len(space) > 0, f"{name} {problem.key}: no valid configuration"
        configs = list(space)
        for config in rng.sample(configs, min(SAMPLES, len(configs))):
            plan = family.plan(problem, config)
            assert plan.launches, f"{name} {config}: nothing timed"
            for launch in _launches(plan):
                where = f"{name} {problem.key} {config} {launch.kernel}"
                assert 0 < launch.threads <= LIMITS.MAX_THREADS, where
                assert all(0 < b <= m for b, m in zip(launch.block, MAX_BLOCK, strict=True)), where
                assert all(0 < g <= m for g, m in zip(launch.grid, MAX_GRID, strict=True)), where
                assert 0 <= launch.smem_bytes <= LIMITS.SMEM_PER_BLOCK_OPTIN, where
            buffers = family.buffers(problem)
            names = {n for n, _ in (*buffers.inputs, *buffers.outputs)} | {
                n for n, _ in (*plan.scratch, *plan.counters)
            }
            for launch in _launches(plan):
                unknown = [a for a in launch.args if isinstance(a, str) and a not in names]
                assert not unknown, f"{name} {config}: {launch.kernel} takes unknown {unknown}"


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_the_kernel_digest_covers_every_file_the_family_compiles(name: str) -> None:
    # Its digest is stored with every evaluation (DESIGN section 2): a kernel or reference file
    # outside kernel_sources() could change without making the stored measurements stale.
    family = FAMILIES[name]
    problem = in_precisions(named_shapes(family.default_shape_set), *family_precisions(family))[0]
    config = next(iter(family.load_space().bind(problem.fields(), LIMITS)))
    sources = set(family.kernel_sources())
    assert family.plan(problem, config).source in sources
    assert family.reference_plan(problem).source in sources


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_a_fused_epilogue_is_applied_or_refused_in_one_line(name: str) -> None:
    # An epilogue (model/epilogue.py) is refused by check() where the family lists none, as
    # another dtype is; where it lists some, every launch takes only buffers the problem has
    # and the reference applying it is part of the family's digest.
    family = FAMILIES[name]
    if family.problem_type is not ConvProblem:
        return
    problem = in_precisions(named_shapes(family.default_shape_set), *family_precisions(family))[0]
    fused = dataclasses.replace(problem, epilogue="scale_bias_add_relu")
    if not family.epilogues:
        with pytest.raises(UnsupportedProblem) as err:
            family.check(fused)
        assert "\n" not in str(err.value) and "scale_bias_add_relu" in str(err.value)
        return
    family.check(fused)
    names = {n for n, _ in (*family.buffers(fused).inputs, *family.buffers(fused).outputs)}
    assert {"scale", "bias", "residual"} <= names
    space = family.load_space().bind(fused.fields(), LIMITS)
    for config in random.Random(name).sample(space.configs, min(50, len(space.configs))):
        plan = family.plan(fused, config)
        names_here = names | {n for n, _ in (*plan.scratch, *plan.counters)}
        args = {a for launch in _launches(plan) for a in launch.args if isinstance(a, str)}
        assert {"scale", "bias", "residual"} <= args <= names_here
    assert family.reference_plan(fused).source in set(family.kernel_sources())
