"""The GEMM-style families share one register-tiled inner loop (register_tile.cuh): the compiler
hands NVRTC the header by name and keys its cubin cache on the header's text too."""

from __future__ import annotations

import re
import shutil

import pytest

from autotune.families import get_family
from autotune.families.base import INCLUDE_DIR
from autotune.families.headers import option_dirs, quoted_headers
from autotune.gpu.compiler import CompileError, Compiler
from autotune.gpu.nvrtc_library import WHEEL_LIBRARIES, compile_program, wheel_nvrtc_libraries
from autotune.model.problem import ConvProblem, GemmProblem
from autotune.model.space import Config

HEADER = INCLUDE_DIR / "register_tile.cuh"
SHARING = ("maxdnn", "implicit_gemm", "im2col_gemm", "sgemm", "winograd")
# A small sgemm plan that compiles in about a second.
SMALL = (
    GemmProblem(M=64, N=64, K=64),
    dict(BM=32, BN=32, BK=8, TM=4, TN=4, VEC=4, DOUBLE_BUFFER=1, SPLIT_K=1, WARP_TX=8),
)


def _plan():
    family = get_family("sgemm")
    problem, values = SMALL
    return family.plan(problem, family.complete(Config.of({**values, "MIN_BLOCKS": 1})))


@pytest.mark.parametrize("name", SHARING)
def test_the_gemm_families_take_their_inner_loop_from_the_header(name) -> None:
    source = get_family(name).source_path
    text = source.read_text()
    assert re.search(r'^#include "register_tile\.cuh"$', text, re.M)
    assert "register_tile::Loop<" in text
    assert re.search(r"RegisterTile::(stage|rows|stage_pipelined)<", text)
    # No copy of the loop is left behind: the header's is the kernel's only FMA loop over the
    # register tile.
    assert "fmaf(fa[" not in text and "fmaf(a[i], b[j]" not in text
    headers = dict(Compiler().headers(source, text))
    assert headers["register_tile.cuh"] == HEADER.read_text()
    # With the other shared headers it includes (test_shared_headers.py), all from include/.
    assert all(headers[name] == (INCLUDE_DIR / name).read_text() for name in headers)


def test_headers_are_found_beside_the_source_then_in_the_search_path(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.cuh").write_text('#include "sub/b.cuh"\n')
    (tmp_path / "sub" / "b.cuh").write_text('#include "c.cuh"\n')  # beside b, not beside a
    (tmp_path / "sub" / "c.cuh").write_text("// c\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "d.cuh").write_text("// d\n")
    text = '#include "a.cuh"\n  #  include "d.cuh"\n#include <cuda_fp16.h>\n#include "nowhere.h"\n'
    found = dict(quoted_headers(text, tmp_path, (other,)))
    assert set(found) == {"a.cuh", "sub/b.cuh", "c.cuh", "d.cuh"}
    assert found["c.cuh"] == "// c\n"
    assert option_dirs(["-std=c++17", f"-I{other}", "--include-path=/x"]) == (
        other,
        tmp_path.__class__("/x"),
    )


def test_a_change_of_the_header_changes_the_cache_key_and_the_cubin(tmp_path) -> None:
    plan = _plan()
    text = plan.source.read_text()
    shipped = Compiler(cache_dir=tmp_path / "cache")
    edited_dir = tmp_path / "include"
    edited_dir.mkdir()
    # The same loop with the serpentine FMA order as the default: other machine code.
    edited = HEADER.read_text().replace("int Order = 0>", "int Order = 1>")
    assert edited != HEADER.read_text()
    (edited_dir / "register_tile.cuh").write_text(edited)
    # The edited loop found first; the kernel's other headers from the shipped include/.
    changed = Compiler(cache_dir=tmp_path / "cache", include_dirs=(edited_dir, INCLUDE_DIR))

    key = shipped.cache_key(text, plan.defines, shipped.headers(plan.source, text))
    other = changed.cache_key(text, plan.defines, changed.headers(plan.source, text))
    assert key != other
    assert key != shipped.cache_key(text, plan.defines)  # the header is part of the key
    # A source without includes keeps the key it had before headers were keyed.
    assert shipped.cache_key("x", ()) == shipped.cache_key("x", (), ())

    first = shipped.compile(plan)
    assert first.key == key and not first.cached
    assert shipped.compile(plan).cached
    second = changed.compile(plan)
    assert second.key == other and not second.cached  # not the shipped header's entry
    assert second.cubin != first.cubin


def test_a_header_that_is_missing_is_a_compile_error(tmp_path) -> None:
    source = tmp_path / "k.cu"
    shutil.copyfile(_plan().source, source)
    with pytest.raises(CompileError, match="register_tile.cuh"):
        Compiler(include_dirs=()).compile_source(source, _plan().defines)


@pytest.mark.parametrize("major", sorted(WHEEL_LIBRARIES))
def test_each_nvrtc_major_compiles_with_the_header(major) -> None:
    # CI's NVRTC comes from PyPI (CUDA 12 and 13 wheels): both take headers by name.
    if major not in wheel_nvrtc_libraries():
        pytest.skip(f"no NVRTC {major} wheel installed")
    plan = _plan()
    compiler = Compiler()
    headers = compiler.headers(plan.source, plan.source.read_text())
    cubin, _, _ = compile_program(
        plan.source.read_text(), plan.source.name, compiler._flags(plan.defines), major, headers
    )
    assert cubin[:4] == b"\x7fELF"


def test_the_maxdnn_and_winograd_loops_compile_through_the_header() -> None:
    # The pipelined and plain ways through a stage, with and without the serpentine order.
    compiler = Compiler()
    maxdnn = get_family("maxdnn")
    problem = ConvProblem(N=13, K=3, C=64, F=64, B=32)
    for buffer, order in ((0, 0), (1, 1), (2, 0)):
        values = dict(BM=64, BN=32, BK=8, TM=8, TN=4, DOUBLE_BUFFER=buffer, VEC=4, MIN_BLOCKS=1)
        config = maxdnn.complete(Config.of({**values, "FMA_ORDER": order}))
        assert compiler.compile(maxdnn.plan(problem, config)).spills == 0
