"""The SHA-256 of tc_wgmma's cubins for nine plans, six with the half-width last channel block
(HALF_BLOCK) and three without, compiled by NVRTC on the CPU: run before and after a change to
the kernel's text to show the machine code unchanged (session 65 folded mma_half_slices into
mma_slices this way: all nine identical).

    python3 results/h200/20261201h/cubins.py CACHE_DIR > cubins.txt
"""

import hashlib
import sys
from pathlib import Path

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

# (B, N, K, C, F), dtype, (BM, BN, WG, STAGES, MULTICAST),
# (GEMM_1X1, PERSISTENT, PINGPONG, SPLIT_K, STORE_TMA, STREAM_K)
CASES = [
    ((128, 20, 5, 96, 256), "bf16", (128, 128, 2, 5, 1), (0, 1, 0, 1, 1, 0)),
    ((128, 20, 5, 96, 256), "fp16", (192, 128, 3, 4, 1), (0, 1, 0, 1, 1, 0)),
    ((128, 20, 5, 96, 256), "bf16", (128, 128, 2, 6, 0), (0, 1, 1, 1, 1, 0)),
    ((3, 37, 1, 96, 104), "bf16", (64, 64, 1, 3, 2), (1, 0, 0, 2, 0, 0)),
    ((21, 29, 3, 72, 200), "tf32", (192, 64, 3, 4, 0), (0, 0, 0, 1, 1, 1)),
    ((3, 13, 3, 40, 100), "tf32", (128, 128, 2, 4, 0), (0, 0, 0, 1, 1, 0)),
    ((32, 28, 3, 512, 512), "tf32", (128, 128, 2, 4, 2), (0, 1, 1, 1, 1, 0)),
    ((32, 14, 1, 1024, 512), "fp16", (192, 128, 3, 4, 0), (1, 1, 0, 1, 1, 0)),
    ((32, 7, 1, 2048, 512), "bf16", (128, 64, 2, 6, 1), (1, 1, 0, 1, 1, 0)),
]


def main() -> None:
    family = get_family("tc_wgmma")
    compiler = Compiler(arch="sm_90", cache_dir=Path(sys.argv[1]))
    for (b, n, k, c, f), dtype, tile, options in CASES:
        problem = ConvProblem(B=b, N=n, K=k, C=c, F=f, dtype=dtype, layout="NHWC")
        names = ("BM", "BN", "WG", "STAGES", "MULTICAST")
        names += ("GEMM_1X1", "PERSISTENT", "PINGPONG", "SPLIT_K", "STORE_TMA", "STREAM_K")
        fixed = dict(C_OUTER=1, L1_CACHE=0, PRODUCER=1, STAGING=1, TILES_PER_BLOCK=1, TMA=1)
        values = dict(zip(names, (*tile, *options), strict=True))
        config = family.complete(Config.of(values | fixed))
        plan = family.plan(problem, config)
        compiled = compiler.compile(plan)
        half = dict(plan.defines).get("HALF_BLOCK", 0)
        digest = hashlib.sha256(compiled.cubin).hexdigest()[:16]
        print(problem.key, *tile[:3], half, compiled.spills, digest)


if __name__ == "__main__":
    main()
