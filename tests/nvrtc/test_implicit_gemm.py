"""implicit_gemm without a GPU: the space binds, plans cover the GEMM, NVRTC compiles it."""

from __future__ import annotations

import struct

import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.implicit_gemm import shared_bytes
from autotune.families.plan import REDUCE_BLOCK, tiled_threads
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("implicit_gemm")
LIMITS = ARCH_LIMITS["sm_90"]
ODD_SHAPES = [
    ConvProblem(N=29, K=5, C=7, F=9),
    ConvProblem(N=33, K=3, C=64, F=70, B=3),
    ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2),
    ConvProblem(N=1, K=1, C=1, F=1),
    ConvProblem(N=16, K=1, C=8, F=33, stride=2, B=2),
]
SHAPES = named_shapes("general") + named_shapes("alexnet") + named_shapes("overfeat") + ODD_SHAPES


def tile(bm: int, bn: int, bk: int, tm: int, tn: int, vec: int) -> dict:
    return dict(BM=bm, BN=bn, BK=bk, TM=tm, TN=tn, VEC=vec)


# (problem, config): the largest tiles (256 x 128 and 128 x 256 at 8 x 8, 512 threads; 128 x 128
# at 1024 threads), the SGEMM-class 128 x 128 / 8 x 8 with either buffering, BK up to 32, every
# VEC, small tiles, odd sizes with partial tiles in m, n and the reduction, and stride 4.
COMPILE_SAMPLE = [
    (ConvProblem(N=13, K=3, C=256, F=256, B=128), tile(128, 128, 8, 8, 8, 4)),
    (ConvProblem(N=13, K=3, C=256, F=256, B=128), tile(128, 128, 32, 8, 8, 4)),
    (ConvProblem(N=12, K=3, C=512, F=1024, B=128), tile(256, 128, 8, 8, 8, 4)),
    (ConvProblem(N=12, K=3, C=512, F=1024, B=128), tile(128, 256, 8, 8, 8, 2)),
    (ConvProblem(N=27, K=5, C=64, F=192, B=128), tile(64, 128, 16, 8, 8, 4)),
    (ConvProblem(N=27, K=5, C=64, F=192, B=128), tile(128, 128, 8, 4, 4, 1)),
    (ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), tile(64, 64, 8, 4, 4, 1)),
    (ConvProblem(N=32, K=3, C=64, F=64), tile(32, 32, 16, 4, 4, 4)),
    (ConvProblem(N=32, K=7, C=64, F=64), tile(32, 64, 4, 2, 2, 4)),
    (ConvProblem(N=33, K=3, C=64, F=70, B=3), tile(128, 64, 32, 8, 4, 2)),
    (ConvProblem(N=29, K=5, C=7, F=9), tile(32, 256, 8, 2, 8, 1)),
    (ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2), tile(32, 32, 32, 2, 4, 1)),
]
COMPILE_SAMPLE = [
    (p, {**v, "DOUBLE_BUFFER": db, "SPLIT_K": 1}) for p, v in COMPILE_SAMPLE for db in (0, 1)
] + [
    # Split-K on the small problems it is for, at the largest tile a split admits.
    (ConvProblem(N=32, K=5, C=64, F=64), {**tile(32, 32, 16, 4, 4, 4), "SPLIT_K": 8}),
    (ConvProblem(N=32, K=3, C=256, F=256), {**tile(64, 64, 8, 8, 8, 4), "SPLIT_K": 4}),
    (ConvProblem(N=32, K=7, C=64, F=64), {**tile(128, 128, 8, 8, 8, 1), "SPLIT_K": 2}),
    (ConvProblem(N=29, K=5, C=7, F=9), {**tile(32, 64, 4, 2, 4, 1), "SPLIT_K": 8}),
]
COMPILE_SAMPLE = [(p, {**v, "DOUBLE_BUFFER": v.get("DOUBLE_BUFFER", 1)}) for p, v in COMPILE_SAMPLE]
# Every sample with the row offsets computed in the kernel and read from the constant table
# (at N=32, K=7 the 32 x 64 tile gathers 8 rows a step at BK = 4: the table read of the masked
# rows past BK is clamped), one row a warp.
COMPILE_SAMPLE = [
    (p, {**v, "OFFSET_TABLE": t, "GATHER_ROWS": 1}) for p, v in COMPILE_SAMPLE for t in (0, 1)
]
# Rows interleaved in a warp, at stride 4 and 2 with ragged columns and reductions: threads
# >= BN x rows (more rows a step than BK = 4 at 256 threads, BN 32), = BN x rows, between BN and
# BN x rows (several columns a thread), < BN, 1024 threads, the 8 x 8 tiles, split-K.
STRIDED = [
    (ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), tile(64, 32, 4, 2, 4, 1), 4),
    (ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), tile(128, 64, 8, 8, 4, 1), 4),
    (ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), tile(64, 64, 8, 4, 4, 1), 4),
    (ConvProblem(N=56, K=11, C=3, F=96, B=128, stride=4), tile(128, 128, 8, 8, 8, 1), 4),
    (ConvProblem(N=56, K=11, C=3, F=96, B=128, stride=4), tile(64, 128, 16, 8, 8, 1), 2),
    (ConvProblem(N=56, K=11, C=3, F=96, B=128, stride=4), tile(128, 128, 8, 4, 4, 1), 2),
    (ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2), tile(32, 128, 32, 4, 4, 1), 4),
    (ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2), tile(32, 256, 8, 2, 8, 1), 2),
    (ConvProblem(N=17, K=3, C=5, F=9, stride=2, B=3), tile(32, 64, 8, 2, 2, 1), 2),
    (ConvProblem(N=17, K=3, C=5, F=9, stride=2, B=3), tile(32, 32, 4, 2, 2, 1), 2),
]
COMPILE_SAMPLE += [
    (p, {**v, "GATHER_ROWS": g, "DOUBLE_BUFFER": db, "SPLIT_K": 1, "OFFSET_TABLE": db})
    for p, v, g in STRIDED
    for db in (0, 1)
] + [
    # Split-K with 4 rows a warp at a small stride-4 problem.
    (
        ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2),
        {**tile(32, 64, 4, 2, 4, 1), "GATHER_ROWS": 4, "SPLIT_K": 4}
        | {"DOUBLE_BUFFER": db, "OFFSET_TABLE": db},
    )
    for db in (0, 1)
]


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


def test_the_kernel_reduces_in_blocks_of_the_modules_reduce_block() -> None:
    source = FAMILY.source_path.read_text()
    assert f"#define REDUCE_BLOCK {REDUCE_BLOCK} " in source


@pytest.mark.slow
@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_space_binds_and_every_config_launches(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    columns = problem.B * problem.N * problem.N
    for config in space:
        plan = FAMILY.plan(problem, config)
        launch = plan.launches[0]
        bm, bn, bk = int(config["BM"]), int(config["BN"]), int(config["BK"])
        tm, tn, vec = int(config["TM"]), int(config["TN"]), int(config["VEC"])
        split = int(config["SPLIT_K"])
        assert bm % tm == 0 and bn % tn == 0 and bk % vec == 0
        assert (problem.C * problem.K**2) % vec == 0
        assert launch.block == (tiled_threads(config), 1, 1)
        assert launch.threads % LIMITS.WARP_SIZE == 0
        assert 2 * LIMITS.WARP_SIZE <= launch.threads <= LIMITS.MAX_THREADS
        # Every thread of the filter loader owns one column of VEC-wide vectors.
        assert launch.threads % (bk // vec) == 0
        assert launch.smem_bytes == shared_bytes(config) <= LIMITS.SMEM_PER_BLOCK_OPTIN
        # Registers the constraint reserves fit the share __launch_bounds__ leaves a thread.
        assert tm * tn + tm + tn <= LIMITS.REGS_PER_BLOCK // launch.threads
        # The grid covers the GEMM exactly: B*N*N pixel columns in x, F filter rows in y,
        # the splits of the reduction in z.
        gx, gy, gz = launch.grid
        assert gx * bn >= columns and (gx - 1) * bn < columns
        assert gy * bm >= problem.F and (gy - 1) * bm < problem.F
        assert gz == split and gy <= 65535
        assert plan.setup == () and plan.finish == ()
        if split == 1:
            assert len(plan.launches) == 1 and plan.scratch == ()
            assert launch.args == ("x", "w", "y")
        else:
            # Each split has slices to reduce; a second kernel adds the partial sums into y.
            assert split * 4 * bk <= problem.C * problem.K**2
            assert launch.args == ("x", "w", "y_split")
            assert plan.scratch == (("y_split", (split, problem.F, columns)),)
            (reduce,) = plan.launches[1:]
            assert reduce.args == ("y_split", "y") and reduce.block == (REDUCE_BLOCK, 1, 1)
            outputs = problem.F * columns
            assert reduce.grid[0] * REDUCE_BLOCK >= outputs
            assert (reduce.grid[0] - 1) * REDUCE_BLOCK < outputs


def test_split_k_only_where_the_grid_is_small() -> None:
    tiny = {int(c["SPLIT_K"]) for c in bound(ConvProblem(N=32, K=5, C=64, F=64))}
    assert tiny == {1, 2, 4, 8, 16}
    big = bound(ConvProblem(N=12, K=3, C=1024, F=1024, B=128))
    assert {int(c["SPLIT_K"]) for c in big} == {1}


def test_space_holds_the_sgemm_class_and_small_tiles() -> None:
    space = bound(ConvProblem(N=13, K=3, C=256, F=256, B=128))
    big = dict(BM=128, BN=128, BK=8, TM=8, TN=8, VEC=4, DOUBLE_BUFFER=1, SPLIT_K=1, OFFSET_TABLE=1)
    big["GATHER_ROWS"] = 1
    assert space.is_valid(Config.of(big))
    assert space.is_valid(Config.of({**big, "BM": 64, "DOUBLE_BUFFER": 0}))
    small = bound(ConvProblem(N=32, K=3, C=64, F=64))
    tile32 = dict(BM=32, BN=32, BK=8, TM=4, TN=4, VEC=4, DOUBLE_BUFFER=1, SPLIT_K=4, OFFSET_TABLE=0)
    assert small.is_valid(Config.of({**tile32, "GATHER_ROWS": 1}))
    # The C*K*K = 363 reduction of conv1 only admits scalar filter loads.
    conv1 = bound(ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4))
    assert {int(c["VEC"]) for c in conv1} == {1}


def test_space_refuses_what_cannot_launch() -> None:
    space = bound(ConvProblem(N=13, K=3, C=256, F=256, B=128))
    base = dict(BM=128, BN=128, BK=8, TM=8, TN=8, VEC=4, DOUBLE_BUFFER=1, SPLIT_K=1, OFFSET_TABLE=1)
    base["GATHER_ROWS"] = 1
    assert space.is_valid(Config.of(base))
    assert not space.is_valid(Config.of({**base, "TM": 2, "TN": 2}))  # 4096 threads
    assert not space.is_valid(Config.of({**base, "BM": 32, "BN": 32}))  # 16 threads
    assert not space.is_valid(Config.of({**base, "BM": 32, "BN": 64}))  # one warp
    # 512 threads at 8 x 8 fit their 128 registers with BK = 8, not with the prefetch of BK = 32.
    assert space.is_valid(Config.of({**base, "BM": 256}))
    assert not space.is_valid(Config.of({**base, "BM": 256, "BK": 32}))
    # A 1024-thread block has 64 registers a thread: 4 x 2 tiles fit, 4 x 4 do not.
    assert space.is_valid(Config.of({**base, "BN": 64, "TM": 4, "TN": 2}))
    assert not space.is_valid(Config.of({**base, "TM": 4, "TN": 4}))


def test_plan_defines_and_launch() -> None:
    problem = ConvProblem(N=27, K=5, C=64, F=192, B=128)
    values = dict(BM=64, BN=128, BK=16, TM=8, TN=8, VEC=4, DOUBLE_BUFFER=1, SPLIT_K=1)
    config = Config.of({**values, "OFFSET_TABLE": 1})
    plan = FAMILY.plan(problem, config)
    assert dict(plan.defines) == dict(
        B=128, C=64, N=27, K=5, F=192, STRIDE=1, BM=64, BN=128, BK=16, TM=8, TN=8, VEC=4,
        DOUBLE_BUFFER=1, SPLIT_K=1, OFFSET_TABLE=1, GATHER_ROWS=1,
    )  # fmt: skip
    # A config stored before OFFSET_TABLE existed plans the kernel it measured: offsets computed,
    # one row a warp; one stored before GATHER_ROWS, one row a warp.
    old = FAMILY.plan(problem, Config.of(values))
    assert dict(old.defines) == {**dict(plan.defines), "OFFSET_TABLE": 0}
    assert FAMILY.plan(problem, Config.of({**values, "OFFSET_TABLE": 1, "GATHER_ROWS": 1})) == plan
    assert FAMILY.later_tunables == {"OFFSET_TABLE": 0, "GATHER_ROWS": 1}
    assert not bound(problem).is_valid(Config.of(values))  # the space itself names the tunable
    assert plan.entries == ("implicit_gemm",)
    (launch,) = plan.launches
    assert launch.args == ("x", "w", "y")
    assert launch.grid == (-(-128 * 27 * 27 // 128), 3, 1)
    assert launch.block == (128, 1, 1)
    assert launch.smem_bytes == 2 * 16 * (64 + 4 + 128) * 4
    assert plan.scratch_bytes == 0


def test_gather_rows_only_for_strided_convolutions() -> None:
    def rows(problem: ConvProblem) -> set[int]:
        return {int(c["GATHER_ROWS"]) for c in bound(problem)}

    conv1 = ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4)
    assert rows(conv1) == {1, 2, 4}
    # Neither the padded tile nor the registers of more column addresses exclude a conv1 tile.
    space = bound(conv1)
    one_row = {c for c in space if c["GATHER_ROWS"] == 1}
    assert len(space) == 3 * len(one_row)
    for g in (2, 4):
        assert {Config.of({**c.as_dict(), "GATHER_ROWS": g}) for c in one_row} <= set(space)
    assert rows(ConvProblem(N=17, K=3, C=5, F=9, stride=2, B=3)) == {1, 2}  # rows <= stride
    assert rows(ConvProblem(N=16, K=1, C=8, F=33, stride=2, B=2)) == {1}  # rows are channels
    assert rows(ConvProblem(N=27, K=5, C=64, F=192, B=128)) == {1}  # stride 1


def test_interleaved_rows_pad_the_gathered_tile() -> None:
    problem = ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4)
    values = dict(BM=128, BN=64, BK=8, TM=8, TN=4, VEC=1, DOUBLE_BUFFER=1, SPLIT_K=1)
    values["OFFSET_TABLE"] = 1
    for g, pad in ((1, 0), (2, 16), (4, 8)):
        config = Config.of({**values, "GATHER_ROWS": g})
        assert bound(problem).is_valid(config)
        (launch,) = FAMILY.plan(problem, config).launches
        assert launch.smem_bytes == 2 * 8 * (128 + 4 + 64 + pad) * 4
        assert dict(FAMILY.plan(problem, config).defines)["GATHER_ROWS"] == g


def test_split_k_plan() -> None:
    problem = ConvProblem(N=32, K=5, C=64, F=64)
    config = Config.of(
        dict(BM=32, BN=32, BK=16, TM=4, TN=4, VEC=4, DOUBLE_BUFFER=0, SPLIT_K=8, OFFSET_TABLE=1)
    )
    plan = FAMILY.plan(problem, config)
    assert plan.entries == ("implicit_gemm", "implicit_gemm_reduce")
    gemm, reduce = plan.launches  # both timed
    assert gemm.grid == (32, 2, 8) and gemm.args == ("x", "w", "y_split")
    assert gemm.smem_bytes == 16 * (32 + 4 + 32) * 4
    assert reduce.grid == (64 * 1024 // REDUCE_BLOCK, 1, 1) and reduce.args == ("y_split", "y")
    assert plan.scratch_bytes == 8 * 64 * 1024 * 4


@pytest.mark.parametrize(
    "problem",
    [
        ConvProblem(N=2048, K=3, C=512, F=4),  # input 2^31 + elements
        ConvProblem(N=1024, K=1, C=1, F=2049),  # output past 2^31
    ],
    ids=str,
)
def test_check_refuses(problem: ConvProblem) -> None:
    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(problem)
    assert "\n" not in str(err.value) and "32-bit" in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "values"), COMPILE_SAMPLE, ids=[f"{p}:{v}" for p, v in COMPILE_SAMPLE]
)
def test_nvrtc_compiles_without_spills(compiler, problem: ConvProblem, values: dict) -> None:
    config = Config.of(values)
    assert bound(problem).is_valid(config)
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    for launch in plan.launches:
        res = compiled.resources[launch.kernel]
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0
        # All shared memory is dynamic, sized by the plan.
        assert res.smem_bytes == 0
        assert launch.smem_bytes <= LIMITS.SMEM_PER_BLOCK_OPTIN
        assert res.registers <= LIMITS.REGS_PER_THREAD
        assert -(-res.registers // 8) * 8 * launch.threads <= LIMITS.REGS_PER_BLOCK
    gemm = plan.launches[0]
    tile_8x8 = values["TM"] * values["TN"] == 64 and values["BK"] == 8
    if tile_8x8 and gemm.threads == 256 and values["SPLIT_K"] == 1:
        # The SGEMM-class tile keeps two blocks per multiprocessor: 128 registers at most.
        assert compiled.resources["implicit_gemm"].registers <= 128


# ---------------------------------------------------------------------------------------------
# The row-offset table


def table_bytes(problem: ConvProblem, bk: int) -> int:
    """The kernel's table: C*K*K rows rounded up to a whole slice of BK, 4 bytes each."""
    return -(-problem.C * problem.K**2 // bk) * bk * 4


def test_offset_table_only_where_it_fits_half_the_constant_bank() -> None:
    # conv2 (1600 rows) and conv5 (2304 rows) take the table at every tile.
    for problem in (
        ConvProblem(N=27, K=5, C=64, F=192, B=128),
        ConvProblem(N=13, K=3, C=256, F=256, B=128),
    ):
        space = bound(problem)
        without = {
            Config.of({**c.as_dict(), "OFFSET_TABLE": 1}) for c in space if not c["OFFSET_TABLE"]
        }
        assert (
            without == {c for c in space if c["OFFSET_TABLE"]} and len(without) == len(space) // 2
        )
    # C=256, K=11: 30976 rows, 121 KB: computed offsets only.
    big = ConvProblem(N=13, K=11, C=256, F=256, B=1)
    assert table_bytes(big, 4) > LIMITS.CONST_BYTES // 2
    assert {int(c["OFFSET_TABLE"]) for c in bound(big)} == {0}
    # The edge: 8192 rows (32 KB) fit at every BK; 8196 rows, padded to BK, do not.
    edge = ConvProblem(N=8, K=2, C=2048, F=64)
    assert {(int(c["BK"]), int(c["OFFSET_TABLE"])) for c in bound(edge)} == {
        (bk, t) for bk in (4, 8, 16, 32) for t in (0, 1)
    }
    past = ConvProblem(N=8, K=2, C=2049, F=64)
    assert table_bytes(past, 4) == 32784
    assert {int(c["OFFSET_TABLE"]) for c in bound(past)} == {0}


def elf_symbol(cubin: bytes, name: str) -> bytes | None:
    """The initial bytes of a symbol of a cubin (ELF64, little-endian), or None when absent."""
    assert cubin[:4] == b"\x7fELF" and cubin[4] == 2 and cubin[5] == 1
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)
    ]
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link][4]
        for pos in range(offset, offset + size, entsize):
            st_name, _, _, shndx, value, st_size = struct.unpack_from("<IBBHQQ", cubin, pos)
            end = cubin.index(b"\0", strtab + st_name)
            if cubin[strtab + st_name : end].decode() == name:
                data = sections[shndx][4] + value
                return cubin[data : data + st_size]
    return None


@pytest.mark.parametrize(
    ("problem", "bk"),
    [
        (ConvProblem(N=27, K=5, C=64, F=192, B=128), 16),
        (ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), 8),  # 363 rows: 5 of padding
        (ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2), 32),
        (ConvProblem(N=29, K=5, C=7, F=9), 4),
    ],
    ids=str,
)
def test_offset_table_holds_every_rows_input_offset(
    compiler, problem: ConvProblem, bk: int
) -> None:
    """What the compiler's constant evaluation put into the cubin, against the offsets of
    (c, ky, kx) in the padded NCHW input computed here."""
    values = dict(BM=32, BN=64, BK=bk, TM=2, TN=4, VEC=1, DOUBLE_BUFFER=1, SPLIT_K=1, GATHER_ROWS=1)
    space = bound(problem)
    with_table = Config.of({**values, "OFFSET_TABLE": 1})
    assert space.is_valid(with_table)
    table = elf_symbol(compiler.compile(FAMILY.plan(problem, with_table)).cubin, "row_table")
    assert table is not None and len(table) == table_bytes(problem, bk)
    s = problem.input_size
    expected = [
        c * s * s + ky * s + kx
        for c in range(problem.C)
        for ky in range(problem.K)
        for kx in range(problem.K)
    ]
    expected += [0] * (len(table) // 4 - len(expected))
    assert list(struct.unpack(f"<{len(table) // 4}i", table)) == expected
    # Without the table the kernel has none.
    without = compiler.compile(FAMILY.plan(problem, Config.of({**values, "OFFSET_TABLE": 0})))
    assert elf_symbol(without.cubin, "row_table") is None
