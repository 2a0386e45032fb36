"""The runtime's pooling kernel compiles (NVRTC, no GPU) with an entry per storage type, and a
pooling's launch covers its output a thread a 16-byte chunk; what it refuses goes to PyTorch."""

from __future__ import annotations

import pytest

pytest.importorskip("cupy")

from autotune.gpu.compiler import Compiler  # noqa: E402
from autotune.runtime.pool_launch import (  # noqa: E402
    ALL_ENTRIES,
    POOL_BLOCK,
    POOL_ENTRIES,
    POOL_SOURCE,
    Pooling,
)


def pooling(storage="bfloat16", channels=64, side=112, kernel=3, stride=2, padding=1, batch=32):
    return Pooling(
        storage, batch, channels, side, side, (kernel, kernel), (stride, stride), (padding,) * 2
    )


def test_every_pooling_entry_is_in_the_cubin(tmp_path):
    compiled = Compiler(arch="sm_90", cache_dir=tmp_path).compile_source(POOL_SOURCE, ())
    assert len(ALL_ENTRIES) == 9  # three storage types, each with windows 2 x 2, 3 x 3 and any
    for entry in ALL_ENTRIES:
        assert entry.encode() in compiled.cubin, entry


@pytest.mark.parametrize(
    "kernel, entry",
    [
        ((3, 3), "max_pool_nhwc_bf16_3x3"),
        ((2, 2), "max_pool_nhwc_bf16_2x2"),
        ((3, 2), "max_pool_nhwc_bf16"),
        ((4, 4), "max_pool_nhwc_bf16"),
    ],
)
def test_a_2x2_or_3x3_window_has_its_own_entry_and_any_other_the_general_one(kernel, entry):
    p = Pooling("bfloat16", 2, 64, 13, 13, kernel, (2, 2), (1, 1))
    assert p.entry == entry
    assert p.launch(sm_count=132).kernel == entry


@pytest.mark.parametrize(
    "side, kernel, stride, padding, out",
    [(112, 3, 2, 1, 56), (224, 2, 2, 0, 112), (13, 3, 2, 0, 6), (7, 3, 1, 1, 7), (37, 2, 3, 1, 13)],
)
def test_the_output_size_is_pytorchs(side, kernel, stride, padding, out):
    # PyTorch's floor((side + 2 padding - kernel) / stride) + 1 (no ceil mode, no dilation)
    assert pooling(side=side, kernel=kernel, stride=stride, padding=padding).out_size == (out, out)


@pytest.mark.parametrize(
    "storage, channels, chunks", [("bfloat16", 64, 8), ("float16", 24, 3), ("float32", 12, 3)]
)
def test_the_launch_is_a_thread_a_chunk_of_output(storage, channels, chunks):
    p = pooling(storage=storage, channels=channels, side=13, kernel=3, stride=2, padding=1, batch=3)
    launch = p.launch(sm_count=132)
    total = 3 * 7 * 7 * chunks
    assert launch.kernel == POOL_ENTRIES[storage] + "_3x3"
    assert launch.args == ("x", "y", 13, 13, chunks, 7, 7, 3, 3, 2, 2, 1, 1, total)
    assert launch.block == (POOL_BLOCK, 1, 1)
    assert launch.grid[0] * POOL_BLOCK >= total


def test_a_large_pooling_is_capped_at_a_grid_the_threads_stride_over():
    launch = pooling(channels=512, side=224, kernel=2, stride=2, padding=0).launch(sm_count=132)
    assert launch.grid == (32 * 132, 1, 1)


@pytest.mark.parametrize(
    "change, why",
    [
        (dict(storage="float64"), "no kernel"),
        (dict(channels=12), "16-byte chunks"),  # 24-byte bf16 pixels
        (dict(channels=3, storage="float32"), "16-byte chunks"),
        (dict(kernel=2, padding=2), "padding over half"),
        (dict(side=2, kernel=3, padding=0), "no output"),
        (dict(stride=0), "out of range"),
        (dict(batch=4096, channels=4096, side=112), "32-bit"),
    ],
)
def test_what_the_kernel_refuses_is_said(change, why):
    assert why in pooling(**change).refusal()
    assert pooling().refusal() is None


def test_a_pooling_is_prepared_once_a_device():
    from autotune.runtime.pool_launch import PoolLaunches

    launches = PoolLaunches()
    assert not launches.prepared(pooling(), 0)
    launches._launches[(0, pooling())] = object()  # what run() keeps after its first call
    assert launches.prepared(pooling(), 0) and not launches.prepared(pooling(), 1)
    assert not launches.prepared(pooling(side=56), 0)
