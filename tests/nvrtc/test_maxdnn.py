"""maxdnn without a GPU: layout arithmetic in NumPy, plans fit the limits, NVRTC compiles it."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.families import UnsupportedProblem, conv2d, get_family
from autotune.families.maxdnn import Layout, emulate, patch_offsets, shared_bytes
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config
from tests.nvrtc.cubin_text import code

FAMILY = get_family("maxdnn")
LIMITS = ARCH_LIMITS["sm_90"]
INT32_MAX = 2**31 - 1

# Batch 1, 2, 3 (padded to a whole image tile), F not a multiple of any BM, C*K*K not a multiple
# of any BK, strides 1 to 4; the odd shapes of tests/test_gpu.py among them.
ODD_SHAPES = [
    ConvProblem(N=37, K=3, C=1, F=3),
    ConvProblem(N=29, K=5, C=7, F=9),
    ConvProblem(N=33, K=3, C=64, F=70, B=3),
    ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2),
    ConvProblem(N=130, K=1, C=1, F=64, B=2),
    ConvProblem(N=1000, K=7, C=1, F=2),
    ConvProblem(N=9, K=3, C=5, F=129, B=65, stride=2),
]
SHAPES = named_shapes("alexnet") + named_shapes("overfeat") + ODD_SHAPES

PAPER = dict(BM=64, BN=64, BK=8, TM=8, TN=8, DOUBLE_BUFFER=1, VEC=4)
LARGEST = dict(BM=128, BN=128, BK=32, TM=8, TN=8, DOUBLE_BUFFER=1, VEC=4)

# (problem, config): the paper's tile, the largest tiles and register blocks, every DOUBLE_BUFFER
# mode and VEC, both MIN_BLOCKS, the smallest block, and odd shapes.
COMPILE_SAMPLE = [
    (ConvProblem(N=12, K=3, C=512, F=1024, B=128), {**PAPER, "MIN_BLOCKS": 1}),
    (ConvProblem(N=12, K=3, C=1024, F=1024, B=128), {**LARGEST, "MIN_BLOCKS": 1}),
    (
        ConvProblem(N=12, K=3, C=1024, F=1024, B=128),
        {**LARGEST, "DOUBLE_BUFFER": 2, "MIN_BLOCKS": 2},
    ),
    (
        ConvProblem(N=13, K=3, C=384, F=256, B=128),
        dict(BM=128, BN=128, BK=16, TM=16, TN=8, DOUBLE_BUFFER=1, VEC=4, MIN_BLOCKS=1),
    ),
    (
        ConvProblem(N=20, K=5, C=96, F=256, B=128),
        dict(BM=128, BN=64, BK=16, TM=16, TN=8, DOUBLE_BUFFER=2, VEC=4, MIN_BLOCKS=1),
    ),
    (  # the 16 x 8 block at three blocks per SM: 168 registers
        ConvProblem(N=12, K=3, C=512, F=1024, B=128),
        dict(
            BM=128,
            BN=128,
            BK=16,
            TM=16,
            TN=8,
            DOUBLE_BUFFER=2,
            VEC=4,
            MIN_BLOCKS=3,
            FMA_ORDER=1,
            BYTE_OFFSETS=1,
        ),
    ),  # fmt: skip
    (
        ConvProblem(N=29, K=5, C=7, F=9),
        dict(BM=32, BN=32, BK=16, TM=4, TN=4, DOUBLE_BUFFER=2, VEC=1, MIN_BLOCKS=2),
    ),
    (
        ConvProblem(N=27, K=5, C=64, F=192, B=128),
        dict(BM=64, BN=128, BK=16, TM=8, TN=8, DOUBLE_BUFFER=1, VEC=2, MIN_BLOCKS=2),
    ),
    (
        ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4),
        dict(BM=64, BN=128, BK=32, TM=8, TN=4, DOUBLE_BUFFER=0, VEC=1, MIN_BLOCKS=1),
    ),
    (
        ConvProblem(N=33, K=3, C=64, F=70, B=3),
        dict(BM=32, BN=32, BK=8, TM=4, TN=4, DOUBLE_BUFFER=1, VEC=4, MIN_BLOCKS=2),
    ),
    (
        ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2),
        dict(BM=32, BN=32, BK=32, TM=4, TN=8, DOUBLE_BUFFER=0, VEC=1, MIN_BLOCKS=1),
    ),
    # Split-K (atomic epilogue, ranges of the reduction) and the serpentine FFMA order, at the
    # largest register blocks and every DOUBLE_BUFFER mode.
    (
        ConvProblem(N=13, K=3, C=384, F=256, B=128),
        dict(
            BM=128,
            BN=128,
            BK=16,
            TM=16,
            TN=8,
            DOUBLE_BUFFER=2,
            VEC=4,
            MIN_BLOCKS=1,
            SPLIT_K=3,
            FMA_ORDER=1,
            BYTE_OFFSETS=1,
        ),
    ),
    (
        ConvProblem(N=13, K=3, C=256, F=256, B=128),
        {
            **LARGEST,
            "DOUBLE_BUFFER": 1,
            "MIN_BLOCKS": 1,
            "SPLIT_K": 2,
            "FMA_ORDER": 1,
            "BYTE_OFFSETS": 1,
        },
    ),
    (
        ConvProblem(N=29, K=5, C=7, F=9),
        dict(
            BM=32,
            BN=32,
            BK=8,
            TM=4,
            TN=4,
            DOUBLE_BUFFER=0,
            VEC=1,
            MIN_BLOCKS=2,
            SPLIT_K=2,
            FMA_ORDER=0,
        ),
    ),
]
# Tunables the samples leave out take their defaults (the behaviour before they existed).
DEFAULTS = dict(SPLIT_K=1, FMA_ORDER=0, BYTE_OFFSETS=0, REG_USAGE_LEVEL=5)


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


def tunables(config: Config) -> tuple[int, ...]:
    return tuple(
        int(config[n])
        for n in ("BM", "BN", "BK", "TM", "TN", "DOUBLE_BUFFER", "VEC", "MIN_BLOCKS", "SPLIT_K")
    )


def register_cap(config: Config) -> int:
    """The per-thread register budget the space's constraint assumes for __launch_bounds__."""
    bm, bn, _, tm, tn, _, _, min_blocks, _ = tunables(config)
    threads = (bm // tm) * (bn // tn)
    return min(LIMITS.REGS_PER_THREAD, LIMITS.REGS_PER_BLOCK // (threads * min_blocks) // 8 * 8)


def test_the_layout_names_chwn_converted_outside_the_timed_region() -> None:
    assert "CHWN" in FAMILY.layout and "outside the timed region" in FAMILY.layout


@pytest.mark.slow
@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_space_binds_and_every_config_launches(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    for config in space:
        bm, bn, bk, tm, tn, _, _, _, split = tunables(config)
        plan = FAMILY.plan(problem, config)
        lay = Layout.of(problem, bm, bn, bk)
        main = plan.launches[-1]
        if split > 1:  # the output is cleared inside the timed run, then added into
            (zero, _) = plan.launches
            assert zero.kernel == "zero_fill" and zero.args[0] == "y_fhwn"
            assert zero.args[1] * 4 == lay.filters * problem.N**2 * lay.images
            assert zero.grid[0] * zero.block[0] >= zero.args[1]
            # Every split has at least one iteration of the reduction (the kernel relies on it).
            ktiles = lay.rows // bk
            per = -(-ktiles // split)
            assert (split - 1) * per < ktiles and ktiles >= 2 * split
        else:
            assert len(plan.launches) == 1
        assert main.kernel == "maxdnn"
        assert main.block == ((bm // tm) * (bn // tn), 1, 1)
        assert main.threads % LIMITS.WARP_SIZE == 0 and main.threads <= LIMITS.MAX_THREADS
        assert main.smem_bytes == shared_bytes(config) <= LIMITS.SMEM_PER_BLOCK_OPTIN
        # One block per output pixel, filter tile and image tile: the grid covers the output
        # with less than one tile of padding in each dimension.
        gx, gy, gz = main.grid
        assert gx == problem.N**2
        assert gy * bm == lay.filters and 0 <= lay.filters - problem.F < bm
        assert gz * bn == lay.images * split and 0 <= lay.images - problem.B < bn
        assert gy <= 65535 and gz <= 65535
        assert lay.rows % bk == 0 and 0 <= lay.rows - problem.C * problem.K**2 < bk
        assert lay.rows * 4 <= LIMITS.CONST_BYTES
        for name, shape in plan.scratch:
            assert int(np.prod(shape)) <= INT32_MAX, name
        for launch in (*plan.setup, *plan.finish):
            assert launch.threads <= LIMITS.MAX_THREADS
            assert launch.grid[1] <= 65535 and launch.grid[2] <= 65535


def test_plan_declares_the_conversions_outside_the_timed_region() -> None:
    problem = ConvProblem(N=13, K=3, C=5, F=70, B=3, stride=2)
    config = Config.of({**PAPER, "MIN_BLOCKS": 1})
    plan = FAMILY.plan(problem, config)
    s = problem.input_size
    assert s == 27
    assert dict(plan.scratch) == {
        "x_chwn": (5, s, s, 64),
        "w_t": (48, 128),  # 45 patch rows padded to 48, 70 filters to 128
        "y_fhwn": (128, 13, 13, 64),
        "offsets": (48,),
    }
    assert plan.constants == (("c_offsets", "offsets"),)
    assert [launch.kernel for launch in plan.setup] == [
        "transpose_pad",
        "transpose_pad",
        "build_offsets",
    ]
    assert [launch.args[:2] for launch in plan.setup[:2]] == [("x", "x_chwn"), ("w", "w_t")]
    (main,) = plan.launches
    assert main.args == ("x_chwn", "w_t", "y_fhwn")
    assert main.grid == (169, 2, 1) and main.block == (64, 1, 1)
    assert main.smem_bytes == 2 * 8 * (64 + 64) * 4
    (finish,) = plan.finish
    assert finish.kernel == "transpose_pad" and finish.args[:2] == ("y_fhwn", "y")
    assert plan.entries == ("transpose_pad", "build_offsets", "maxdnn")
    defines = dict(plan.defines)
    assert defines == dict(
        B=3, C=5, N=13, K=3, F=70, STRIDE=2, **PAPER, MIN_BLOCKS=1, SPLIT_K=1, FMA_ORDER=0,
        BYTE_OFFSETS=0,
    )  # fmt: skip


def _transpose_numpy(launch, arrays: dict[str, np.ndarray]) -> None:
    """What transpose_pad computes, from the launch's own arguments (flat buffers)."""
    src, dst, rows, cols, rows_pad, cols_pad, src_g, src_r, dst_g, dst_c = launch.args
    groups = launch.grid[2]
    source, target = arrays[src], arrays[dst]
    for g in range(groups):
        r, c = np.meshgrid(np.arange(rows_pad), np.arange(cols_pad), indexing="ij")
        inside = (r < rows) & (c < cols)
        values = np.zeros(r.shape)
        values[inside] = source[g * src_g + r[inside] * src_r + c[inside]]
        target[g * dst_g + c * dst_c + r] = values


@pytest.mark.parametrize(
    ("problem", "tiles"),
    [
        (ConvProblem(N=5, K=3, C=4, F=9, B=3), (32, 32, 8)),
        (ConvProblem(N=4, K=5, C=3, F=70, B=2, stride=3), (64, 32, 16)),
        (ConvProblem(N=3, K=1, C=9, F=5, B=33, stride=2), (32, 64, 32)),
    ],
    ids=str,
)
def test_layout_arithmetic_in_numpy(problem: ConvProblem, tiles: tuple[int, int, int]) -> None:
    """The offsets gather and the padded GEMM give the convolution, and the plan's transpose
    arguments move x, w and y where the kernel expects them."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, problem.input_shape)
    w = rng.uniform(-1, 1, problem.filter_shape)
    reference = conv2d.reference_numpy(problem, x, w)
    lay = Layout.of(problem, *tiles)
    np.testing.assert_allclose(emulate(problem, lay, x, w), reference, rtol=1e-12, atol=1e-12)

    bm, bn, bk = tiles
    config = Config.of(dict(BM=bm, BN=bn, BK=bk, TM=4, TN=4, DOUBLE_BUFFER=1, VEC=1, MIN_BLOCKS=1))
    plan = FAMILY.plan(problem, config)
    arrays = {"x": x.ravel(), "w": w.ravel(), "y": np.full(reference.size, np.nan)}
    arrays.update({name: np.full(int(np.prod(shape)), np.nan) for name, shape in plan.scratch})
    for launch in plan.setup[:2]:
        _transpose_numpy(launch, arrays)
    x_chwn = arrays["x_chwn"]
    assert not np.isnan(x_chwn).any() and not np.isnan(arrays["w_t"]).any()
    offsets = patch_offsets(problem, lay)
    y_fhwn = np.empty((lay.filters, problem.N, problem.N, lay.images))
    for oy in range(problem.N):
        for ox in range(problem.N):
            origin = (oy * problem.stride * problem.input_size + ox * problem.stride) * lay.images
            patch = x_chwn[origin + offsets[:, None] + np.arange(lay.images)[None, :]]
            y_fhwn[:, oy, ox, :] = arrays["w_t"].reshape(lay.rows, lay.filters).T @ patch
    arrays["y_fhwn"] = y_fhwn.ravel()
    (finish,) = plan.finish
    _transpose_numpy(finish, arrays)
    np.testing.assert_allclose(arrays["y"].reshape(reference.shape), reference, rtol=1e-12)


def test_offsets_table_walks_channels_rows_columns() -> None:
    problem = ConvProblem(N=4, K=2, C=3, F=1, B=5, stride=2)
    lay = Layout.of(problem, 32, 32, 8)
    s, bp = problem.input_size, lay.images
    assert (s, bp, lay.rows) == (8, 32, 16)
    offsets = patch_offsets(problem, lay)
    expected = [((c * s + i) * s + j) * bp for c in range(3) for i in range(2) for j in range(2)]
    assert offsets.tolist() == expected + [0] * 4
    assert offsets.max() < problem.C * s * s * bp


def _thread_coords(bm: int, bn: int, tm: int, tn: int) -> list[tuple[int, int]]:
    """(tx, ty) of every thread, as the kernel derives them from warp and lane."""
    threads_x, threads_y = bn // tn, bm // tm
    warp_x = min(threads_x, 8)
    warp_y, per_row = 32 // warp_x, threads_x // warp_x
    coords = []
    for tid in range(threads_x * threads_y):
        warp, lane = divmod(tid, 32)
        coords.append(
            ((warp % per_row) * warp_x + lane % warp_x, (warp // per_row) * warp_y + lane // warp_x)
        )
    return coords


def _tile_words(width: int, bk: int, vec: int, threads: int) -> list[tuple[int, int]]:
    """(row, column) of every VEC-wide word the threads load, as the kernel's Tile computes."""
    words = width // vec
    whole_rows = threads >= words
    loads = bk * words // threads
    out = []
    for tid in range(threads):
        row0 = tid // words if whole_rows else 0
        col0 = (tid % words if whole_rows else tid) * vec
        for i in range(loads):
            row = i * (threads // words) if whole_rows else i // (words // threads)
            col = 0 if whole_rows else (i % (words // threads)) * threads * vec
            out.append((row0 + row, col0 + col))
    return out


def test_every_config_partitions_its_tiles_among_threads() -> None:
    """The space's warp and load constraints are what make the kernel's index formulas cover
    each output of the block tile, and each word of the staged tiles, exactly once."""
    seen = set()
    for problem in (named_shapes("overfeat")[3], ODD_SHAPES[2]):
        for config in bound(problem):
            bm, bn, bk, tm, tn, _, vec, _, _ = tunables(config)
            if (bm, bn, bk, tm, tn, vec) in seen:
                continue
            seen.add((bm, bn, bk, tm, tn, vec))
            threads_x, threads_y = bn // tn, bm // tm
            coords = _thread_coords(bm, bn, tm, tn)
            assert sorted(coords) == [(x, y) for x in range(threads_x) for y in range(threads_y)]
            filters = sorted(
                g * 4 * threads_y + 4 * ty + i
                for ty in range(threads_y)
                for g in range(tm // 4)
                for i in range(4)
            )
            images = sorted(
                h * 4 * threads_x + 4 * tx + j
                for tx in range(threads_x)
                for h in range(tn // 4)
                for j in range(4)
            )
            assert filters == list(range(bm)) and images == list(range(bn))
            for width in (bm, bn):
                words = _tile_words(width, bk, vec, threads_x * threads_y)
                assert sorted(words) == [
                    (r, c) for r in range(bk) for c in range(0, width, vec)
                ]  # fmt: skip
    assert len(seen) > 50


@pytest.mark.parametrize(
    "problem",
    [
        ConvProblem(N=12, K=3, C=2048, F=64, B=128),  # 73 KB of offsets
        ConvProblem(N=12, K=5, C=700, F=64, B=128),
        ConvProblem(N=4000, K=3, C=256, F=64, B=1),  # CHWN copy past 2^31 elements
    ],
    ids=str,
)
def test_check_refuses(problem: ConvProblem) -> None:
    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(problem)
    assert "\n" not in str(err.value)


def test_check_accepts_overfeat_l5() -> None:
    problem = named_shapes("overfeat")[4]
    assert (problem.C, problem.K) == (1024, 3)
    FAMILY.check(problem)  # 36 KB of offsets


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "values"), COMPILE_SAMPLE, ids=[f"{p}:{v}" for p, v in COMPILE_SAMPLE]
)
def test_nvrtc_compiles_without_spills(compiler, problem: ConvProblem, values: dict) -> None:
    config = Config.of({**DEFAULTS, **values})
    assert bound(problem).is_valid(config)
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    # zero_fill is compiled always, launched only with split-K.
    assert set(compiled.resources) == {*plan.entries, "zero_fill"}
    for entry, res in compiled.resources.items():
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0, entry
    main = compiled.resources["maxdnn"]
    threads = plan.launches[-1].threads
    assert main.registers <= register_cap(config)
    assert main.registers * threads <= LIMITS.REGS_PER_BLOCK
    assert main.smem_bytes == 0  # all of it dynamic: plan.launches[-1].smem_bytes
    assert compiled.resources["transpose_pad"].smem_bytes == 32 * 33 * 4


def test_configs_stored_before_the_later_tunables_plan_as_before() -> None:
    """A stored config without SPLIT_K, FMA_ORDER, BYTE_OFFSETS and REG_USAGE_LEVEL plans the
    kernel it measured: no split (one launch, grid z = image tiles), row-major FFMAs, element
    offsets, no ptxas option."""
    problem = named_shapes("alexnet")[3]
    stored = Config.of({**PAPER, "MIN_BLOCKS": 1})
    completed = Config.of({**PAPER, "MIN_BLOCKS": 1, **DEFAULTS})
    assert FAMILY.complete(stored) == completed
    old, new = FAMILY.plan(problem, stored), FAMILY.plan(problem, completed)
    assert old == new and len(old.launches) == 1
    assert dict(old.defines)["SPLIT_K"] == 1 and dict(old.defines)["BYTE_OFFSETS"] == 0
    assert old.ptxas_options == ()


# OverFeat L4's best 128 x 128 / BK=32 configuration (results/h100/maxdnn_profile).
WIDE = dict(
    BM=128, BN=128, BK=32, TM=8, TN=8, DOUBLE_BUFFER=2, VEC=4, MIN_BLOCKS=1, SPLIT_K=1,
    FMA_ORDER=1, BYTE_OFFSETS=1,
)  # fmt: skip


def test_reg_usage_level_is_a_ptxas_option_only_off_its_default() -> None:
    problem = named_shapes("overfeat")[3]
    default = FAMILY.plan(problem, Config.of({**WIDE, "REG_USAGE_LEVEL": 5}))
    raised = FAMILY.plan(problem, Config.of({**WIDE, "REG_USAGE_LEVEL": 10}))
    assert default.ptxas_options == ()
    assert raised.ptxas_options == ("--register-usage-level=10",)
    assert raised.defines == default.defines and raised.launches == default.launches


def test_the_space_admits_the_new_values_only_where_they_were_measured() -> None:
    space = bound(named_shapes("overfeat")[3])
    assert space.is_valid(Config.of({**DEFAULTS, **WIDE, "REG_USAGE_LEVEL": 10}))
    assert not space.is_valid(Config.of({**DEFAULTS, **WIDE, "BN": 64, "REG_USAGE_LEVEL": 10}))
    block16x8 = {**DEFAULTS, **WIDE, "BK": 16, "TM": 16, "MIN_BLOCKS": 3}
    assert space.is_valid(Config.of(block16x8))
    assert not space.is_valid(Config.of({**block16x8, "SPLIT_K": 2}))  # spills
    assert not space.is_valid(Config.of({**block16x8, "TM": 8}))  # 3 repeats 1 or 2


@pytest.mark.slow
def test_reg_usage_level_changes_the_cubin_without_spills_or_lost_occupancy(compiler) -> None:
    """Level 10 builds other machine code (ptxas reads the next row's fragments a row ahead),
    still without spills and within the 128 registers that keep 2 blocks of 256 threads per SM."""
    problem = named_shapes("overfeat")[3]
    builds = {
        level: compiler.compile(FAMILY.plan(problem, Config.of({**WIDE, "REG_USAGE_LEVEL": level})))
        for level in (5, 10)
    }
    assert builds[5].key != builds[10].key
    assert code(builds[5].cubin)[".text.maxdnn"] != code(builds[10].cubin)[".text.maxdnn"]
    for build in builds.values():
        main = build.resources["maxdnn"]
        assert main.spill_stores == main.spill_loads == 0 and main.registers <= 128
