"""The runtime's padding kernels compile (NVRTC, no GPU), one entry per layout and element size,
and each plan's padding launch names the entry of its problem's layout and storage type."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("cupy")

from autotune.gpu.compiler import Compiler  # noqa: E402
from autotune.runtime.calls import Call  # noqa: E402
from autotune.runtime.plans import PAD_ENTRIES, PAD_SOURCE, pad_arguments  # noqa: E402


def test_every_padding_entry_is_in_the_cubin(tmp_path):
    compiled = Compiler(arch="sm_90", cache_dir=tmp_path).compile_source(PAD_SOURCE, ())
    for entry in PAD_ENTRIES.values():
        assert entry.encode() in compiled.cubin, entry


@pytest.mark.parametrize(
    "dtype, layout, entry",
    [
        ("fp32", "NCHW", "pad_nchw"),
        ("tf32", "NHWC", "pad_nhwc"),
        ("bf16", "NHWC", "pad_nhwc_16"),
        ("fp16", "NCHW", "pad_nchw_16"),
    ],
)
def test_the_padding_launch_reads_the_plans_layout(dtype, layout, entry):
    call = Call.of((0, 2, 8, 14, 14, 16, 8, 3, 3, 1, 1))
    problem = replace(call.problem(), dtype=dtype, layout=layout)
    name, args = pad_arguments(call, problem)
    assert name == entry
    side = problem.input_size
    assert side == 16
    if layout == "NHWC":  # images, then the channels innermost
        assert args == ("x_caller", "x", 2, 14, 14, side, 1, 8)
    else:  # planes of B * C
        assert args == ("x_caller", "x", 16, 14, 14, side, 1)
