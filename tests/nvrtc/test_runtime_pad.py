"""The runtime's padding kernels compile (NVRTC, no GPU), one entry per layout and element size,
and each plan's padding launch names the entry of its problem's layout and storage type."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("cupy")

from autotune.gpu.compiler import Compiler  # noqa: E402
from autotune.runtime.calls import Call  # noqa: E402
from autotune.runtime.plans import (  # noqa: E402
    PAD_CHUNKS_ENTRY,
    PAD_ENTRIES,
    PAD_SOURCE,
    pad_arguments,
)


def test_every_padding_entry_is_in_the_cubin(tmp_path):
    compiled = Compiler(arch="sm_90", cache_dir=tmp_path).compile_source(PAD_SOURCE, ())
    for entry in (*PAD_ENTRIES.values(), PAD_CHUNKS_ENTRY):
        assert entry.encode() in compiled.cubin, entry


@pytest.mark.parametrize(
    "dtype, layout, channels, entry",
    [
        ("fp32", "NCHW", 8, "pad_nchw"),
        ("fp16", "NCHW", 8, "pad_nchw_16"),
        ("tf32", "NHWC", 3, "pad_nhwc"),  # 12-byte pixels: element by element
        ("bf16", "NHWC", 12, "pad_nhwc_16"),  # 24-byte pixels
        ("tf32", "NHWC", 8, "pad_nhwc_chunks"),  # 32-byte pixels: two chunks each
        ("bf16", "NHWC", 8, "pad_nhwc_chunks"),  # one chunk each
    ],
)
def test_the_padding_launch_reads_the_plans_layout(dtype, layout, channels, entry):
    call = Call.of((0, 2, channels, 14, 14, 16, channels, 3, 3, 1, 1))
    problem = replace(call.problem(), dtype=dtype, layout=layout)
    name, args, items = pad_arguments(call, problem)
    assert name == entry
    side = problem.input_size
    assert side == 16
    if entry == PAD_CHUNKS_ENTRY:  # images, then 16-byte chunks of a pixel innermost
        chunks = channels * problem.precision.bytes // 16
        assert args == ("x_caller", "x", 2, 14, 14, side, 1, chunks)
        assert items == 2 * side * side * chunks
    elif layout == "NHWC":  # images, then the channels innermost
        assert args == ("x_caller", "x", 2, 14, 14, side, 1, channels)
        assert items == 2 * side * side * channels
    else:  # planes of B * C
        assert args == ("x_caller", "x", 2 * channels, 14, 14, side, 1)
        assert items == 2 * channels * side * side
