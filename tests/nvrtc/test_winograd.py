"""winograd without a GPU: its transform matrices are exact, the space binds on the 3x3 layers,
the plan covers the work and sizes the scratch, and NVRTC compiles sampled configurations."""

from __future__ import annotations

import random
import re
from fractions import Fraction

import numpy as np
import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.winograd import Layout, shared_bytes, transform_flops
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("winograd")
LIMITS = ARCH_LIMITS["sm_90"]
THREE_BY_THREE = [p for s in ("alexnet", "overfeat", "vgg16") for p in named_shapes(s) if p.K == 3]
ODD = [ConvProblem(N=7, K=3, C=5, F=9, B=3), ConvProblem(N=1, K=3, C=1, F=1)]


def _number(text: str) -> float:
    """'-1.0 / 3' or '0.5' as the float the kernel's constant expression means."""
    top, _, bottom = text.replace(" ", "").partition("/")
    return float(Fraction(top) / Fraction(bottom or "1"))


def _tables(m: int) -> dict[str, np.ndarray]:
    """The constexpr bt / g_mat / at tables of the kernel for output tile m, parsed from the .cu."""
    source = FAMILY.source_path.read_text()
    tables = {}
    for name in ("bt", "g_mat", "at"):
        body = source.split(f" {name}(int i, int j) {{", 1)[1].split("return t[i][j];", 1)[0]
        branches = re.split(r"#(?:if|elif) MT == (\d)|#else", body)
        # ['', '2', text, '4', text, '5', text, None, text]: the #else holds m = 6.
        found = {
            int(k) if k else 6: text for k, text in zip(branches[1::2], branches[2::2], strict=True)
        }
        numbers = re.findall(r"-?\d+(?:\.\d*)?(?:\s*/\s*\d+)?", found[m].split("=", 1)[1])
        values = [_number(n) for n in numbers]
        tables[name] = np.array(values)
    n = m + 2
    return {
        "BT": tables["bt"].reshape(n, n),
        "G": tables["g_mat"].reshape(n, 3),
        "AT": tables["at"].reshape(m, n),
    }


@pytest.mark.parametrize("m", [2, 4, 5, 6])
def test_transform_matrices_compute_the_correlation_exactly(m: int) -> None:
    t = _tables(m)
    rng = np.random.default_rng(m)
    d = rng.standard_normal((m + 2, m + 2))
    g = rng.standard_normal((3, 3))
    u = t["G"] @ g @ t["G"].T
    v = t["BT"] @ d @ t["BT"].T
    y = t["AT"] @ (u * v) @ t["AT"].T
    windows = np.lib.stride_tricks.sliding_window_view(d, (3, 3))
    direct = np.einsum("yxij,ij->yx", windows, g)
    np.testing.assert_allclose(y, direct, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("problem", THREE_BY_THREE + ODD, ids=str)
def test_space_binds_and_plans_cover_the_work(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = FAMILY.load_space().bind(problem.fields(), LIMITS)
    assert len(space) > 0
    rng = random.Random(problem.key)
    for config in rng.sample(space.configs, min(40, len(space))):
        v = {k: int(config[k]) for k in config.as_dict()}
        lay = Layout.of(problem, v["OUT_TILE"], v["BM"], v["BN"], v["BK"])
        plan = FAMILY.plan(problem, config)
        assert plan.entries == ("wino_filter", "wino_input", "wino_gemm", "wino_output")
        filt, inp, gemm, out = plan.launches
        a2 = (v["OUT_TILE"] + 2) ** 2
        assert gemm.grid == (lay.columns // v["BN"], lay.filters // v["BM"], a2)
        assert lay.columns >= lay.tiles and lay.filters >= problem.F and lay.channels >= problem.C
        assert filt.grid[0] * filt.block[0] >= lay.channels * lay.filters
        assert inp.grid[0] * inp.block[0] >= lay.columns and inp.grid[1] == lay.channels
        assert out.grid[0] * out.block[0] >= lay.tiles and out.grid[1] == problem.F
        assert gemm.smem_bytes == shared_bytes(config) <= LIMITS.SMEM_PER_BLOCK_OPTIN
        assert dict(plan.scratch) == {
            "u": (lay.channels, a2, lay.filters),
            "v": (lay.channels, a2, lay.columns),
            "m": (lay.filters, a2, lay.columns),
        }
        assert plan.scratch_bytes == 4 * a2 * (
            lay.channels * lay.filters + (lay.channels + lay.filters) * lay.columns
        )


def test_transform_flops_count_the_products() -> None:
    conv3 = ConvProblem(N=13, K=3, C=192, F=384, B=128)
    # 4 x 4 tiles of 4 cover 16 x 16: 36 products per tile against 9 per output of the direct
    # count: 576 / (9 * 169) of its work.
    assert transform_flops(conv3, 4) * 9 * 169 == conv3.flops * 576
    assert transform_flops(ConvProblem(N=12, K=3, C=8, F=8), 6) * 9 * 144 == (
        ConvProblem(N=12, K=3, C=8, F=8).flops * 4 * 64
    )


@pytest.mark.parametrize(
    "problem",
    [ConvProblem(N=13, K=5, C=8, F=8), ConvProblem(N=13, K=3, C=8, F=8, stride=2)],
    ids=str,
)
def test_check_refuses_other_filters_and_strides(problem: ConvProblem) -> None:
    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(problem)
    assert "\n" not in str(err.value)


COMPILE_SAMPLE = [
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), 5, (128, 128, 16, 8, 8, 2, 4, 1)),
    (ConvProblem(N=12, K=3, C=1024, F=1024, B=128), 4, (128, 128, 8, 8, 8, 1, 4, 2)),
    (ConvProblem(N=12, K=3, C=256, F=512, B=128), 6, (64, 128, 32, 8, 8, 2, 4, 1)),
    (ConvProblem(N=224, K=3, C=3, F=64, B=32), 2, (64, 64, 8, 4, 8, 0, 2, 2)),
    (ConvProblem(N=7, K=3, C=5, F=9, B=3), 4, (32, 32, 8, 4, 4, 1, 2, 2)),
]


@pytest.mark.slow
@pytest.mark.parametrize("stage", [0, 1])
@pytest.mark.parametrize(("problem", "m", "tile"), COMPILE_SAMPLE, ids=str)
def test_nvrtc_compiles_without_spills(compiler, problem: ConvProblem, m: int, tile, stage) -> None:
    names = ("BM", "BN", "BK", "TM", "TN", "DOUBLE_BUFFER", "VEC", "MIN_BLOCKS")
    config = Config.of(
        {
            "OUT_TILE": m,
            **dict(zip(names, tile, strict=True)),
            "IN_BLOCK": 64,
            "OUT_BLOCK": 64,
            "OUT_STAGE": stage,
        }
    )
    assert FAMILY.load_space().bind(problem.fields(), LIMITS).is_valid(config)
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    for launch in plan.launches:
        res = compiled.resources[launch.kernel]
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0
        assert -(-res.registers // 8) * 8 * launch.threads <= LIMITS.REGS_PER_BLOCK


def _emulate(problem: ConvProblem, m: int, bm: int, bn: int, bk: int, out_block: int, x, w):
    """The four kernels' index arithmetic in NumPy (float64): the filter and input transforms
    into the padded channel-major scratch, the alpha^2 products, and the output transform
    staged per block of OUT_BLOCK tiles as wino_output does with OUT_STAGE = 1."""
    p = problem
    t = _tables(m)
    lay = Layout.of(p, m, bm, bn, bk)
    al, side, n = m + 2, -(-p.N // m), p.N
    s = n + 2
    u = np.zeros((lay.channels, al * al, lay.filters))
    u[: p.C, :, : p.F] = np.einsum("ik,fckl,jl->cijf", t["G"], w, t["G"]).reshape(p.C, al * al, p.F)
    v = np.zeros((lay.channels, al * al, lay.columns))
    for tile in range(lay.tiles):
        b, rest = divmod(tile, side * side)
        y0, x0 = (rest // side) * m, (rest % side) * m
        patch = np.zeros((p.C, al, al))
        part = x[b, :, y0 : min(y0 + al, s), x0 : min(x0 + al, s)]
        patch[:, : part.shape[1], : part.shape[2]] = part
        v[: p.C, :, tile] = np.einsum("ik,ckl,jl->cij", t["BT"], patch, t["BT"]).reshape(p.C, -1)
    prod = np.einsum("cxf,cxp->fxp", u, v)  # m: [FP][A2][PP]
    y = np.full(problem.output_shape, np.nan)
    width = side * m
    for f in range(p.F):
        for begin in range(0, lay.tiles, out_block):
            end = min(lay.tiles, begin + out_block)
            g_begin = begin // side
            rows = np.full(((out_block - 1) // side + 2) * m * width, np.nan)
            for tile in range(begin, end):
                mm = prod[f, :, tile].reshape(al, al)
                out = t["AT"] @ mm @ t["AT"].T
                base = (tile // side - g_begin) * m * width + (tile % side) * m
                for i in range(m):
                    rows[base + i * width : base + i * width + m] = out[i]
            g_count = (end - 1) // side - g_begin + 1
            for e in range(g_count * m * width):
                col, r = e % width, e // width
                g = g_begin + r // m
                row = (g % side) * m + r % m
                tile = g * side + col // m
                if col < n and row < n and begin <= tile < end:
                    assert np.isnan(y[g // side, f, row, col]), "written twice"
                    y[g // side, f, row, col] = rows[e]
    return y


@pytest.mark.parametrize(
    ("problem", "m", "out_block"),
    [
        (ConvProblem(N=7, K=3, C=5, F=3, B=3), 4, 64),
        (ConvProblem(N=13, K=3, C=2, F=2, B=2), 5, 64),
        (ConvProblem(N=12, K=3, C=3, F=2, B=1), 6, 64),
        (ConvProblem(N=9, K=3, C=1, F=1, B=3), 2, 64),
        (ConvProblem(N=1, K=3, C=2, F=2, B=5), 2, 64),
        (ConvProblem(N=30, K=3, C=1, F=1, B=1), 4, 64),
        # Blocks of tiles that start and end inside a tile row (and an image).
        (ConvProblem(N=30, K=3, C=1, F=2, B=1), 2, 64),
        (ConvProblem(N=13, K=3, C=2, F=1, B=9), 4, 64),
    ],
    ids=str,
)
def test_emulated_kernels_match_the_direct_convolution(problem, m, out_block) -> None:
    from autotune.families.conv2d import reference_numpy

    rng = np.random.default_rng(0)
    x = rng.random(problem.input_shape) * 2 - 1
    w = rng.random(problem.filter_shape) * 2 - 1
    y = _emulate(problem, m, 32, 32, 8, out_block, x, w)
    assert not np.isnan(y).any()
    np.testing.assert_allclose(y, reference_numpy(problem, x, w), rtol=1e-9, atol=1e-9)
