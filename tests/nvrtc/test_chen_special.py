"""chen_special without a GPU: the space binds, plans fit the launch limits, NVRTC compiles it."""

from __future__ import annotations

import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("chen_special")
LIMITS = ARCH_LIMITS["sm_90"]

ODD_SHAPES = [
    ConvProblem(N=n, K=k, C=1, F=f, B=b)
    for n in (1, 37, 50, 1000)
    for k in (1, 3, 5, 7)
    for f, b in ((1, 1), (3, 2))
]
SHAPES = named_shapes("special") + ODD_SHAPES

# (problem, config): every VEC, small and odd N, K up to 11, F rolled and unrolled in the kernel,
# and blocks at the register cap (1024 threads with K = 7, 512 with K = 9).
COMPILE_SAMPLE = [
    (ConvProblem(N=37, K=3, C=1, F=3), dict(W=32, H=4, VEC=1)),
    (ConvProblem(N=50, K=1, C=1, F=1, B=2), dict(W=64, H=2, VEC=2)),
    (ConvProblem(N=1000, K=7, C=1, F=16), dict(W=256, H=8, VEC=2)),
    (ConvProblem(N=1024, K=5, C=1, F=64), dict(W=512, H=16, VEC=4)),
    (ConvProblem(N=1024, K=3, C=1, F=16), dict(W=128, H=32, VEC=4)),
    (ConvProblem(N=1000, K=11, C=1, F=16), dict(W=128, H=8, VEC=4)),
    (ConvProblem(N=1000, K=7, C=1, F=1), dict(W=1024, H=4, VEC=1)),
    (ConvProblem(N=999, K=9, C=1, F=3), dict(W=1024, H=64, VEC=2)),
]


def shared_bytes(problem: ConvProblem, config: Config) -> int:
    """The kernel's static shared memory: K rows, padded so every thread's last vector fits."""
    k, w, vec = problem.K, int(config["W"]), int(config["VEC"])
    vecs = -(-(k + vec - 1) // vec)
    return k * (w + (vecs - 1) * vec) * 4


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_space_binds_and_every_config_launches(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    for config in space:
        plan = FAMILY.plan(problem, config)
        (launch,) = plan.launches
        w, h, vec = int(config["W"]), int(config["H"]), int(config["VEC"])
        assert launch.block == (w // vec, 1, 1)
        assert launch.threads % LIMITS.WARP_SIZE == 0
        assert launch.threads <= LIMITS.MAX_THREADS
        assert launch.smem_bytes == 0
        assert shared_bytes(problem, config) <= LIMITS.SMEM_PER_BLOCK
        assert problem.F * problem.K**2 * 4 <= LIMITS.CONST_BYTES
        gx, gy, gz = launch.grid
        assert gx * w >= problem.N and (gx - 1) * w < problem.N
        assert gy * h >= problem.N and (gy - 1) * h < problem.N
        assert gz == problem.B and gy <= 65535


def test_plan_defines_and_constants() -> None:
    problem = ConvProblem(N=1000, K=5, C=1, F=16, B=2)
    plan = FAMILY.plan(problem, Config.of(dict(W=256, H=8, VEC=4)))
    defines = dict(plan.defines)
    assert defines == dict(B=2, N=1000, K=5, F=16, STRIDE=1, W=256, H=8, VEC=4)
    assert plan.constants == (("c_filter", "w"),)
    assert plan.entries == ("chen_special",)
    assert plan.launches[0].args == ("x", "y")
    assert plan.launches[0].grid == (4, 125, 2)


@pytest.mark.parametrize(
    "problem",
    [
        ConvProblem(N=64, K=3, C=2, F=4),
        ConvProblem(N=64, K=3, C=1, F=4, stride=2),
        ConvProblem(N=64, K=13, C=1, F=1),
        ConvProblem(N=64, K=11, C=1, F=200),
    ],
    ids=str,
)
def test_check_refuses(problem: ConvProblem) -> None:
    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(problem)
    assert "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "values"), COMPILE_SAMPLE, ids=[f"{p}:{v}" for p, v in COMPILE_SAMPLE]
)
def test_nvrtc_compiles_without_spills(compiler, problem: ConvProblem, values: dict) -> None:
    config = Config.of(values)
    assert bound(problem).is_valid(config)
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    res = compiled.resources["chen_special"]
    threads = plan.launches[0].threads
    assert res.spill_stores == 0 and res.spill_loads == 0
    assert res.smem_bytes == shared_bytes(problem, config) <= LIMITS.SMEM_PER_BLOCK
    assert res.registers <= LIMITS.REGS_PER_THREAD
    assert res.registers * threads <= LIMITS.REGS_PER_BLOCK
