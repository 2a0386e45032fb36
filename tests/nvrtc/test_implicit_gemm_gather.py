"""implicit_gemm's gather loader without a GPU: its thread -> (row, column) mapping emulated."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

import pytest

from autotune.families import get_family
from autotune.families.implicit_gemm import gather_pad, shared_bytes
from autotune.families.plan import tiled_threads
from autotune.model.expression import Expression
from autotune.model.problem import ConvProblem
from autotune.model.space import ARCH_LIMITS, Config
from tests.nvrtc.test_implicit_gemm import elf_symbol

FAMILY = get_family("implicit_gemm")
LIMITS = ARCH_LIMITS["sm_90"]
WARP = 32
BANKS = 32
CONV1 = ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4)


@dataclass(frozen=True, slots=True)
class Loader:
    """The B (gathered input) loader of one block, as the kernel's macros define it."""

    threads: int
    bn: int
    bk: int
    rows: int  # GATHER_ROWS

    @property
    def qt(self) -> int:  # B_QT: thread groups along the columns
        return self.threads // self.rows

    @property
    def rstep(self) -> int:  # B_RSTEP
        return max(self.threads // self.bn, self.rows)

    @property
    def cols(self) -> int:  # B_COLS
        return 1 if self.qt >= self.bn else self.bn // self.qt

    @property
    def row_steps(self) -> int:  # B_ROWS
        return -(-self.bk // self.rstep)

    @property
    def pitch(self) -> int:  # BS_LD
        return self.bn + gather_pad(self.rows)

    def first(self, tid: int) -> tuple[int, int]:
        """gather_row(tid), gather_col(tid)."""
        group = tid // self.rows
        row = (group // self.bn if self.qt >= self.bn else 0) * self.rows + tid % self.rows
        return row, group % self.bn

    def loads(self, tid: int):
        """(i, j, row, column) of every element thread tid loads; rows past BK are masked."""
        r0, c0 = self.first(tid)
        for i in range(self.row_steps):
            for j in range(self.cols):
                yield i, j, r0 + i * self.rstep, c0 + j * self.qt


LOADERS = [
    Loader(t, bn, bk, g)
    for t, bn, bk, g in itertools.product(
        (64, 128, 256, 512, 1024), (32, 64, 128, 256), (4, 8, 16, 32), (1, 2, 4)
    )
    # The space's tiles: at least 2 columns a thread at most 8 (BN / TN threads along n).
    if bn // 8 <= t
] + [Loader(128, 64, 6, 4), Loader(256, 32, 6, 4)]  # BK not a multiple of the rows


def test_unpadded_with_one_row_a_warp() -> None:
    # GATHER_ROWS = 1 is the loader as it was: consecutive threads on consecutive columns.
    assert gather_pad(1) == 0
    assert Loader(256, 64, 8, 1).first(70) == (1, 6)
    assert Loader(64, 128, 8, 1).rstep == 1 and Loader(64, 128, 8, 1).cols == 2


@pytest.mark.parametrize("loader", LOADERS, ids=str)
def test_every_tile_element_is_loaded_once_without_bank_conflicts(loader: Loader) -> None:
    written: dict[tuple[int, int], int] = {}
    stores: dict[tuple[int, int, int], set[int]] = {}  # (warp, i, j) -> banks
    for tid in range(loader.threads):
        for i, j, row, col in loader.loads(tid):
            assert 0 <= col < loader.bn
            if row >= loader.bk:
                continue  # masked: neither loaded nor stored
            written[row, col] = written.get((row, col), 0) + 1
            banks = stores.setdefault((tid // WARP, i, j), set())
            bank = (row * loader.pitch + col) % BANKS
            assert bank not in banks, (tid, i, j, row, col)
            banks.add(bank)
    assert set(written) == set(itertools.product(range(loader.bk), range(loader.bn)))
    assert set(written.values()) == {1}
    # compute_slice reads float4 fragments along a row: every row starts 16-byte aligned.
    assert loader.pitch % 4 == 0


@pytest.mark.parametrize("rows", [1, 2, 4])
def test_a_warp_takes_rows_fastest_then_consecutive_columns(rows: int) -> None:
    loader = Loader(256, 64, 16, rows)
    for warp in range(loader.threads // WARP):
        lanes = [loader.first(t) for t in range(warp * WARP, (warp + 1) * WARP)]
        r0, c0 = lanes[0]
        assert r0 % rows == 0
        assert lanes == [(r0 + lane % rows, c0 + lane // rows) for lane in range(WARP)]


def input_offset(problem: ConvProblem, k: int, n: int) -> int:
    """Where the kernel reads row k = (c, ky, kx), column n = (b, oy, ox) in the NCHW input."""
    p, s = problem, problem.input_size
    c, ky, kx = k // p.K**2, k // p.K % p.K, k % p.K
    b, oy, ox = n // p.N**2, n // p.N % p.N, n % p.N
    return ((b * p.C + c) * s + oy * p.stride + ky) * s + ox * p.stride + kx


def warp_requests(problem: ConvProblem, loader: Loader, n0: int = 0):
    """The float offsets each warp load of one block reads, slice by slice over the reduction
    (rows past the reduction and columns past the output are left out, as the kernel masks or
    clamps them)."""
    gk, gn = problem.C * problem.K**2, problem.B * problem.N**2
    for k0 in range(0, gk, loader.bk):
        for warp in range(loader.threads // WARP):
            lanes = range(warp * WARP, (warp + 1) * WARP)
            for i in range(loader.row_steps):
                for j in range(loader.cols):
                    addresses = []
                    for tid in lanes:
                        r0, c0 = loader.first(tid)
                        row, col = r0 + i * loader.rstep, c0 + j * loader.qt
                        k, n = k0 + row, n0 + col
                        if row < loader.bk and k < gk and n < gn:
                            addresses.append((k, n, input_offset(problem, k, n)))
                    if addresses:
                        yield addresses


def sectors(addresses) -> int:
    return len({offset * 4 // 32 for _, _, offset in addresses})


def test_stride_4_warp_reads_one_contiguous_128_byte_span_at_4_rows() -> None:
    """conv1: where a warp's 4 rows are taps kx..kx+3 of one filter row and its 8 columns are
    neighbouring pixels of one output row, it reads 32 consecutive floats."""
    p = CONV1
    loader = Loader(256, 64, 8, 4)
    aligned = 0
    for addresses in warp_requests(p, loader):
        ks = sorted({k for k, _, _ in addresses})
        ns = sorted({n for _, n, _ in addresses})
        one_filter_row = len({k // p.K for k in ks}) == 1
        one_output_row = len({n // p.N for n in ns}) == 1
        if len(addresses) == WARP and one_filter_row and one_output_row:
            offsets = sorted(o for _, _, o in addresses)
            assert offsets == list(range(offsets[0], offsets[0] + WARP))
            aligned += 1
    assert aligned > 0


def test_row_interleaving_cuts_the_sectors_of_a_stride_4_gather() -> None:
    """Over the whole reduction of one conv1 block (every 32-byte sector a warp load touches):
    one row a warp spans 16 sectors or more (16.7: a warp's columns may cross an output row);
    2 rows 9.4; 4 rows 5.8, a third (4 where a warp's rows stay in one filter row)."""
    mean = {}
    for rows in (1, 2, 4):
        counts = [sectors(a) for a in warp_requests(CONV1, Loader(256, 64, 8, rows))]
        mean[rows] = sum(counts) / len(counts)
    assert 16 <= mean[1] <= 17
    assert mean[2] < 0.6 * mean[1]
    assert mean[4] < 0.36 * mean[1]


# ---------------------------------------------------------------------------------------------
# The emulation against the kernel's own macros and mapping, evaluated by NVRTC

PROBE = """
// Test probe: the loader's macros and gather_row / gather_col of every thread, evaluated by the
// compiler into a constant the test reads back from the cubin.
struct GatherProbe {
    int v[7 + 2 * THREADS];
    __host__ __device__ constexpr GatherProbe() : v() {
        v[0] = B_RSTEP; v[1] = B_COLS; v[2] = B_ROWS; v[3] = BS_LD;
        v[4] = STAGES * (AS_SIZE + BS_SIZE) * 4; v[5] = REG_ESTIMATE; v[6] = B_QT;
        for (int t = 0; t < THREADS; ++t) {
            v[7 + 2 * t] = gather_row(t);
            v[8 + 2 * t] = gather_col(t);
        }
    }
};
__constant__ GatherProbe gather_probe = GatherProbe();
extern "C" __global__ void gather_probe_keep(int* out) {
    out[threadIdx.x] = gather_probe.v[threadIdx.x];
}
"""


def constraint_side(start: str, problem: ConvProblem, config: Config) -> int:
    """The left side of the space's constraint `start ... <= limit`, evaluated at config."""
    (source,) = [e.source for e in FAMILY.load_space().constraints if e.source.startswith(start)]
    left = source[: source.rindex(" <= ")]
    return Expression(left)({**problem.fields(), **config.as_dict(), **LIMITS.as_dict()})


def cfg(bm, bn, bk, tm, tn, rows, *, db=1, split=1, table=0) -> dict:
    return dict(
        BM=bm, BN=bn, BK=bk, TM=tm, TN=tn, VEC=1, GATHER_ROWS=rows, DOUBLE_BUFFER=db,
        SPLIT_K=split, OFFSET_TABLE=table,
    )  # fmt: skip


ODD_STRIDE_4 = ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2)
ODD_STRIDE_2 = ConvProblem(N=17, K=3, C=5, F=9, stride=2, B=3)
# Every case of the loader: threads >= BN * rows (B_RSTEP = threads / BN rows a step, past BK
# at BK = 4), threads = BN * rows, BN <= threads < BN * rows, threads < BN; 1024 threads.
PROBED = [
    (CONV1, cfg(64, 32, 4, 2, 4, 4)),  # 256 threads, BN 32: 8 rows a step, BK 4
    (CONV1, cfg(128, 64, 8, 8, 4, 4, table=1)),  # 256 threads = 64 x 4
    (CONV1, cfg(64, 64, 16, 4, 4, 4, db=0)),  # 128 threads < 64 x 4: 2 columns a thread
    (CONV1, cfg(32, 128, 8, 4, 4, 2)),  # 64 threads < 128: 4 columns a thread
    (CONV1, cfg(128, 128, 8, 4, 4, 2, table=1)),  # 1024 threads
    (ODD_STRIDE_4, cfg(32, 256, 32, 2, 8, 4, table=1)),  # ragged columns and reduction
    (ODD_STRIDE_4, cfg(32, 64, 4, 2, 4, 2, split=2)),
    (ODD_STRIDE_2, cfg(32, 64, 8, 2, 2, 2, db=0)),
    (ODD_STRIDE_2, cfg(32, 64, 8, 4, 4, 1)),
]


@pytest.mark.parametrize(("problem", "values"), PROBED, ids=[f"{p}:{v}" for p, v in PROBED])
def test_the_kernel_maps_threads_as_emulated(
    compiler, tmp_path, problem: ConvProblem, values: dict
) -> None:
    config = Config.of(values)
    assert FAMILY.load_space().bind(problem.fields(), LIMITS).is_valid(config)
    plan = FAMILY.plan(problem, config)
    probe = tmp_path / "implicit_gemm_probe.cu"
    probe.write_text(FAMILY.source_path.read_text() + PROBE)
    cubin = compiler.compile_source(probe, plan.defines).cubin
    raw = elf_symbol(cubin, "gather_probe")
    t = tiled_threads(config)
    assert raw is not None and len(raw) == 4 * (7 + 2 * t)
    v = struct.unpack(f"<{len(raw) // 4}i", raw)
    loader = Loader(t, values["BN"], values["BK"], values["GATHER_ROWS"])
    assert v[:4] == (loader.rstep, loader.cols, loader.row_steps, loader.pitch)
    assert v[6] == loader.qt
    # The shared memory the kernel addresses is what the plan asks for and the space counts.
    assert v[4] == plan.launches[0].smem_bytes == shared_bytes(config)
    assert v[4] == constraint_side("(1 + DOUBLE_BUFFER) * BK", problem, config)
    # The register estimate of __launch_bounds__ is the space constraint's, and fits.
    assert v[5] == constraint_side("TM * TN + TM + TN", problem, config)
    assert v[5] <= min(LIMITS.REGS_PER_THREAD, LIMITS.REGS_PER_BLOCK // t)
    assert [(v[7 + 2 * i], v[8 + 2 * i]) for i in range(t)] == [loader.first(i) for i in range(t)]
