"""chen_general without a GPU: the space binds, plans fit the launch limits, NVRTC compiles it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.chen_general import MAX_CSPLIT, geometry
from autotune.families.files import INCLUDE_DIR
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("chen_general")
LIMITS = ARCH_LIMITS["sm_90"]
NAMES = {"W", "H", "FTB", "WT", "FT", "CSH", "VEC", "CSPLIT", "PREFETCH"}

TUNED_SHAPES = named_shapes("general") + named_shapes("alexnet") + named_shapes("overfeat")
# N not a multiple of any tile, C not a multiple of CSH, F not a multiple of FTB, batch, stride,
# even K, K = 11, and the smallest problem there is.
ODD_SHAPES = [
    ConvProblem(N=29, K=5, C=7, F=9),
    ConvProblem(N=33, K=3, C=64, F=70, B=3),
    ConvProblem(N=1, K=1, C=1, F=1),
    ConvProblem(N=1, K=1, C=5, F=3, B=2),
    ConvProblem(N=20, K=11, C=16, F=16),
    ConvProblem(N=13, K=11, C=3, F=20, B=2, stride=4),
    ConvProblem(N=7, K=2, C=3, F=8),
    ConvProblem(N=50, K=9, C=2, F=1),
    ConvProblem(N=17, K=3, C=300, F=33, stride=2),
    ConvProblem(N=12, K=7, C=9, F=24, B=2),
]


# (problem, config): the largest tiles and blocks, K = 11 with stride 4, every VEC, splits of 2
# to 8, both PREFETCH paths, channel/filter/edge tails, and the most register-hungry configs of
# several shapes (estimate 230+ of 255).
def _sample(problem: ConvProblem, w, h, ftb, wt, ft, csh, vec, csplit, prefetch):
    values = dict(W=w, H=h, FTB=ftb, WT=wt, FT=ft, CSH=csh, VEC=vec, CSPLIT=csplit)
    return problem, {**values, "PREFETCH": prefetch}


COMPILE_SAMPLE = [
    _sample(ConvProblem(N=256, K=3, C=256, F=256), 64, 4, 128, 16, 8, 1, 4, 1, 1),
    _sample(ConvProblem(N=256, K=5, C=64, F=64), 64, 2, 64, 8, 16, 1, 4, 1, 1),
    _sample(ConvProblem(N=256, K=7, C=256, F=256), 32, 8, 64, 8, 8, 1, 4, 1, 1),
    _sample(ConvProblem(N=32, K=3, C=256, F=256), 32, 8, 64, 8, 8, 2, 4, 8, 1),
    _sample(ConvProblem(N=32, K=5, C=64, F=64), 32, 1, 64, 4, 8, 1, 2, 4, 1),
    _sample(ConvProblem(N=128, K=3, C=64, F=64), 64, 4, 64, 8, 16, 4, 1, 2, 1),
    _sample(ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), 32, 4, 32, 16, 1, 1, 1, 1, 1),
    _sample(ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), 16, 8, 64, 16, 8, 1, 4, 1, 0),
    _sample(ConvProblem(N=20, K=11, C=16, F=16), 16, 16, 16, 16, 2, 1, 1, 8, 1),
    _sample(ConvProblem(N=13, K=3, C=384, F=256, B=128), 16, 4, 128, 8, 16, 1, 4, 1, 1),
    _sample(ConvProblem(N=29, K=5, C=7, F=9), 16, 16, 16, 16, 4, 1, 1, 4, 1),
    _sample(ConvProblem(N=12, K=7, C=9, F=24, B=2), 8, 8, 16, 4, 4, 1, 4, 2, 1),
    _sample(ConvProblem(N=17, K=3, C=300, F=33, stride=2), 16, 4, 32, 16, 2, 2, 2, 4, 0),
    _sample(ConvProblem(N=1, K=1, C=1, F=1), 4, 1, 8, 4, 8, 1, 4, 1, 1),
]


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


@pytest.mark.parametrize("problem", TUNED_SHAPES, ids=str)
def test_tuned_shapes_have_spaces_worth_tuning(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert 200 <= len(space) <= 10_000
    # The tuner has real choices: every tunable takes more than one value, except where the
    # space pins it on purpose (CSH where K * K is large, CSPLIT where the grid is large enough,
    # PREFETCH = 0 where the register prefetch is small).
    for name in NAMES - {"CSPLIT", "CSH", "PREFETCH"}:
        assert len({c[name] for c in space}) > 1, name
    if problem.K <= 3:
        assert len({c["CSH"] for c in space}) > 1


@pytest.mark.slow
@pytest.mark.parametrize("problem", TUNED_SHAPES + ODD_SHAPES, ids=str)
def test_every_config_launches_and_covers_the_output(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    p = problem
    for config in space:
        c = {k: int(v) for k, v in config.items}
        plan = FAMILY.plan(p, config)
        (launch,) = plan.launches
        geo = geometry(p, config)
        threads = (c["FTB"] // c["FT"]) * (c["W"] * c["H"] // c["WT"])
        assert c["FTB"] % c["FT"] == 0 and c["W"] % c["WT"] == 0
        assert c["FT"] % c["VEC"] == 0 and c["WT"] * p.stride % c["VEC"] == 0
        assert launch.block == (threads, 1, 1) and 0 < threads <= LIMITS.MAX_THREADS
        assert launch.smem_bytes == geo.smem_bytes <= LIMITS.SMEM_PER_BLOCK_OPTIN
        assert geo.registers <= geo.register_cap
        assert geo.register_cap * threads <= LIMITS.REGS_PER_BLOCK
        gx, gy, gz = launch.grid
        # X: groups of FTB filters covering F; Y: W x H tiles covering N x N, for each image.
        assert gx * c["FTB"] >= p.F > (gx - 1) * c["FTB"]
        tiles_x, tiles_y = -(-p.N // c["W"]), -(-p.N // c["H"])
        assert tiles_x * c["W"] >= p.N > (tiles_x - 1) * c["W"]
        assert tiles_y * c["H"] >= p.N > (tiles_y - 1) * c["H"]
        assert gy == tiles_x * tiles_y * p.B <= 65535
        # Z: one cluster of CSPLIT blocks, each with at least one chunk of CSH channels.
        assert gz == c["CSPLIT"] <= MAX_CSPLIT
        chunks = -(-p.C // c["CSH"])
        per_split = -(-chunks // c["CSPLIT"])
        assert (c["CSPLIT"] - 1) * per_split < chunks


def test_plan_defines_and_launch() -> None:
    problem = ConvProblem(N=29, K=5, C=7, F=9, B=2)
    values = dict(W=16, H=4, FTB=16, WT=8, FT=4, CSH=2, VEC=4, CSPLIT=2, PREFETCH=1)
    config = Config.of(values)
    plan = FAMILY.plan(problem, config)
    assert dict(plan.defines) == dict(
        B=2,
        C=7,
        N=29,
        K=5,
        F=9,
        STRIDE=1,
        W=16,
        H=4,
        FTB=16,
        WT=8,
        FT=4,
        CSH=2,
        VEC=4,
        CSPLIT=2,
        PREFETCH=1,
    )
    assert plan.entries == ("chen_general",)
    assert plan.constants == () and plan.scratch == () and plan.setup == ()
    (launch,) = plan.launches
    assert launch.args == ("x", "w", "y")
    assert launch.grid == (1, 2 * 8 * 2, 2)
    assert launch.block == (4 * 8, 1, 1)
    # Staged chunk: 2 channels of an 8 x 20 input tile (rows of 8 + 12 words) and of 25 filter
    # rows of 16 + 4 words; the partial sums (16 x 65 words) are smaller.
    assert launch.smem_bytes == 4 * 2 * (8 * 20 + 25 * 20)


@pytest.mark.parametrize(
    "problem",
    [
        ConvProblem(N=8, K=3, C=4, F=4, B=70_000),
        ConvProblem(N=20_000, K=3, C=1, F=1),
        ConvProblem(N=8, K=11, C=200_000, F=4),
    ],
    ids=str,
)
def test_check_refuses(problem: ConvProblem) -> None:
    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(problem)
    assert "\n" not in str(err.value)


def _tightest(problem: ConvProblem) -> Config:
    """The valid config whose register estimate comes closest to the cap."""

    def slack(config: Config) -> int:
        geo = geometry(problem, config)
        return geo.register_cap - geo.registers

    return min(bound(problem), key=slack)


TIGHT_SHAPES = [
    ConvProblem(N=32, K=3, C=256, F=256),
    ConvProblem(N=128, K=7, C=64, F=64),
    ConvProblem(N=56, K=11, C=3, F=96, B=128, stride=4),
    ConvProblem(N=12, K=3, C=512, F=1024, B=128),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "values"),
    COMPILE_SAMPLE + [(p, _tightest(p).as_dict()) for p in TIGHT_SHAPES],
    ids=[f"{p}:{Config.of(v)}" for p, v in COMPILE_SAMPLE] + [f"{p}:tight" for p in TIGHT_SHAPES],
)
def test_nvrtc_compiles_without_spills(compiler, problem: ConvProblem, values: dict) -> None:
    config = Config.of(values)
    assert bound(problem).is_valid(config)
    plan = FAMILY.plan(problem, config)
    res = compiler.compile(plan).resources["chen_general"]
    geo = geometry(problem, config)
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0
    assert res.registers <= geo.register_cap
    assert res.registers * geo.threads <= LIMITS.REGS_PER_BLOCK
    # All shared memory is dynamic, sized by the plan.
    assert res.smem_bytes == 0
    assert plan.launches[0].smem_bytes <= LIMITS.SMEM_PER_BLOCK_OPTIN


# -- the kernel's arithmetic on the host -----------------------------------------------------

HOST_DIR = Path(__file__).parents[1] / "data" / "cuda_host"
# Channel tail (C % CSH), filter tail (F % FTB), edge tiles, batch, the cluster split, stride 4
# with K = 11, both PREFETCH paths, VEC 2 and 4.
HOST_SAMPLE = [
    _sample(ConvProblem(N=12, K=3, C=9, F=24, B=2), 8, 8, 16, 4, 4, 4, 4, 2, 1),
    _sample(ConvProblem(N=13, K=11, C=3, F=20, B=2, stride=4), 8, 8, 16, 4, 4, 1, 2, 2, 0),
    _sample(ConvProblem(N=11, K=3, C=7, F=20, B=30), 8, 8, 16, 4, 4, 2, 2, 1, 1),
]


def host_source() -> str:
    """The kernel source with its sm_90 PTX helpers and its shared array taken from the shim."""
    text = FAMILY.source_path.read_text()
    begin = text.index("// --- cluster primitives")
    end = text.index("// --- end cluster primitives ---")
    shared = "extern __shared__ __align__(16) float smem[];"
    assert text.count(shared) == 1
    text = text[:begin] + "HOST_CLUSTER_PRIMITIVES\n" + text[end:]
    return text.replace(shared, "float* smem = host_smem;")


@pytest.mark.slow  # builds and runs a host program (g++, a thread per CUDA thread)
@pytest.mark.parametrize(
    ("problem", "values"), HOST_SAMPLE, ids=[f"{p}:{Config.of(v)}" for p, v in HOST_SAMPLE]
)
def test_kernel_source_computes_the_convolution_on_the_host(
    tmp_path: Path, problem: ConvProblem, values: dict
) -> None:
    """Every CUDA thread of the plan's grid as a host thread, barriers as std::barrier, the
    cluster as its CTAs run together: the output must match a float64 convolution, and
    AddressSanitizer (where the compiler has it) must see no access past the exactly sized
    buffers, shared memory included."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ to build the host emulation")
    config = Config.of(values)
    assert bound(problem).is_valid(config)
    plan = FAMILY.plan(problem, config)
    (launch,) = plan.launches
    (tmp_path / "kernel.cu").write_text(host_source())
    (tmp_path / "defines.h").write_text("".join(f"#define {k} {v}\n" for k, v in plan.defines))
    exe = tmp_path / "host_kernel"
    base = [
        gxx,
        "-std=c++20",
        "-O1",
        "-pthread",
        f"-I{tmp_path}",
        f"-I{HOST_DIR}",
        f"-I{INCLUDE_DIR}",
    ]
    source = [str(HOST_DIR / "chen_general_main.cpp"), "-o", str(exe)]
    built = subprocess.run([*base, "-fsanitize=address", *source], capture_output=True, text=True)
    if built.returncode != 0:  # no sanitizer runtime: still check the numbers
        built = subprocess.run([*base, *source], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    args = [*launch.grid, launch.threads, launch.smem_bytes, 7]
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0"}
    ran = subprocess.run(
        [str(exe), *map(str, args)], capture_output=True, text=True, timeout=300, env=env
    )
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    assert ran.stdout.startswith("nonfinite=0 ")
