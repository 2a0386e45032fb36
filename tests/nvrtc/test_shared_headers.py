"""The helpers the kernels had each written out live once in kernels/include/: the vector-type
helper (vector.cuh), the cp.async copies (cp_async.cuh), maxdnn's and winograd's cooperative tile
loads (tile_words.cuh) and im2col_gemm's and implicit_gemm's filter loader (filter_tile.cuh); the
compiler hands them to NVRTC by name."""

from __future__ import annotations

import re

import pytest

from autotune.families import get_family
from autotune.families.files import INCLUDE_DIR, KERNEL_DIR
from autotune.gpu.compiler import Compiler

USERS = {
    "vector.cuh": (
        "chen_general", "chen_special", "conv3d", "im2col_gemm", "implicit_gemm", "maxdnn",
        "sgemm", "winograd",
    ),
    "cp_async.cuh": ("conv3d", "maxdnn", "tc_implicit_gemm", "tc_wgmma", "winograd"),
    "tile_words.cuh": ("maxdnn", "winograd"),
    "filter_tile.cuh": ("im2col_gemm", "implicit_gemm"),
}  # fmt: skip


@pytest.mark.parametrize("header", sorted(USERS))
def test_each_family_that_needs_a_helper_includes_it(header) -> None:
    for name in USERS[header]:
        source = get_family(name).source_path
        text = source.read_text()
        assert re.search(rf'^#include "{re.escape(header)}"$', text, re.M), name
        assert dict(Compiler().headers(source, text))[header] == (INCLUDE_DIR / header).read_text()


def test_no_kernel_writes_its_own_copy() -> None:
    for source in sorted(KERNEL_DIR.glob("*.cu")):
        text = source.read_text()
        assert not re.search(r"struct (Vec|VecOf)\b", text), source.name
        code = re.sub(r"//[^\n]*", "", text)  # the asm, not the comments
        assert not re.search(r"cp\.async\.(ca|cg|commit_group|wait_group)\b", code), source.name
        assert "struct Tile " not in text, source.name
        if source.stem in USERS["filter_tile.cuh"]:
            assert "#define A_LOADS" not in text and "as[(a_k + v)" not in text, source.name
