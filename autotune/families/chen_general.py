"""chen_general: Chen et al.'s general-case kernel (C channels), Algorithm 2 with a 2D block."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.families.base import Family, KernelPlan, Launch, UnsupportedProblem, cdiv
from autotune.families.conv2d import problem_defines
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

MAX_GRID_Y = 65535
INT32_LIMIT = 2**31
REGS_PER_THREAD = 255
REGS_PER_BLOCK = 64 * 1024
TUNABLES = ("W", "H", "FTB", "WT", "FT", "CSH", "VEC", "CSPLIT", "PREFETCH")
# Thread-block clusters of more than 8 blocks need a non-portable opt-in on sm_90.
MAX_CSPLIT = 8


@dataclass(frozen=True, slots=True)
class Geometry:
    """What one configuration launches, in the kernel's own terms (chen_general.cu)."""

    threads: int
    grid: tuple[int, int, int]
    smem_bytes: int  # dynamic: the staged chunk, or the partial sums when CSPLIT > 1
    span: int  # input pixels behind a thread's WT outputs, held in registers (whole vectors)
    prefetch: int  # words of a chunk per thread (held in registers with PREFETCH = 1)
    registers: int  # what the space's constraints assume a thread needs (an upper bound)
    register_cap: int  # what __launch_bounds__(threads, 1) lets ptxas give a thread


def geometry(problem: ConvProblem, config: Config) -> Geometry:
    p, c = problem, {k: int(v) for k, v in config.items}
    w, h, ftb, wt, ft, csh, vec, csplit, prefetch_on = (c[k] for k in TUNABLES)
    s, k = p.stride, p.K
    threads = (ftb // ft) * (w * h // wt)
    span = (wt - 1) * s + k
    span_words = cdiv(span, vec) * vec
    in_h, in_w = (h - 1) * s + k, (w - 1) * s + k
    img_stride = (w - wt) * s + span_words
    stage = csh * (in_h * img_stride + k * k * (ftb + vec))
    partials = ftb * (w * h + 1) if csplit > 1 else 0
    prefetch = cdiv(csh * in_h * in_w, threads) + cdiv(ftb * csh * k * k, threads)
    # Fitted on ptxas reports: a prefetched word costs itself and (about) its address; the plain
    # copy loop a few registers.
    registers = ft * wt + span_words + ft + (2 * prefetch if prefetch_on else 8) + 16
    cap = min(REGS_PER_THREAD, REGS_PER_BLOCK // threads // 8 * 8)
    grid = (cdiv(p.F, ftb), cdiv(p.N, w) * cdiv(p.N, h) * p.B, csplit)
    return Geometry(threads, grid, 4 * max(stage, partials), span_words, prefetch, registers, cap)


class ChenGeneral(Family):
    """Chen et al. general case. Paper parameter -> ours (same names where the paper has one):

    - W x H image block (output pixels per thread block) -> W, H; the block reads a
      ((H-1)*stride+K) x ((W-1)*stride+K) input tile with its halo.
    - FTB filters per thread block (grid X = ceil(F/FTB)) -> FTB; grid Y = image blocks x batch.
    - T_X = FTB/FT threads along the filters, T_Y = W*H/WT along the pixels (derived).
    - WT contiguous output pixels of a row per thread -> WT; FT filters per thread -> FT.
    - CSH channels staged per step in shared memory -> CSH.
    - n of the bank-width model W_SMB = n * W_CD (float/float2/float4 shared loads) -> VEC.
    - prefetch of the next CSH channels into registers (lines 8-9 and 17-18) -> PREFETCH = 1;
      PREFETCH = 0 (ours) copies each chunk between the barriers instead, for chunks whose share
      per thread would take too many registers (large K, large FTB).
    - ours: CSPLIT splits the C channels over CSPLIT blocks of one sm_90 thread-block cluster,
      which sum their partial tiles through distributed shared memory (1 = the paper's kernel).
    """

    name = "chen_general"
    description = (
        "C channels: FTB filters x a W x H output tile per block, FT x WT register accumulators "
        "per thread sliding a (WT+K-1)-pixel row over the K taps, CSH channels of input tile and "
        "transposed padded filters in shared memory with register prefetch, VEC-wide shared "
        "loads; CSPLIT > 1 splits the channels over a thread-block cluster"
    )
    paper = "000 (Chen et al., DAC 2017), section 4, Algorithm 2"
    default_shape_set = "general"

    def check_limits(self, problem: ConvProblem) -> None:
        p = problem
        if p.B > MAX_GRID_Y:
            raise UnsupportedProblem(
                f"{self.name} puts image blocks x batch in grid Y, at most {MAX_GRID_Y}; "
                f"B={p.B} alone exceeds it"
            )
        # Offsets inside a staged chunk (up to 8 input channels, up to 128 filters) are 32-bit.
        if 8 * p.input_size**2 >= INT32_LIMIT or 128 * p.C * p.K**2 >= INT32_LIMIT:
            raise UnsupportedProblem(
                f"{self.name} indexes a chunk of input channels and filters with 32-bit offsets; "
                f"input side {p.input_size} with C={p.C}, K={p.K} is too large"
            )

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        p = problem
        geo = geometry(p, config)
        tunables = tuple((name, int(config[name])) for name in TUNABLES)
        defines = (
            *problem_defines(p),
            *tunables,
        )
        launch = Launch(
            "chen_general",
            grid=geo.grid,
            block=(geo.threads, 1, 1),
            args=("x", "w", "y"),
            smem_bytes=geo.smem_bytes,
        )
        return KernelPlan(self.source_path, defines, (launch,))
