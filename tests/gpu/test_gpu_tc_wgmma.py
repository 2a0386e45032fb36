"""On a CUDA device (Hopper, sm_90a): tc_wgmma correct at odd shapes in TF32, BF16 and FP16, through
the family's plan and the project's GPU path (session buffers in the storage type, the float64
reference over the stored inputs, the dtype's tolerance)."""

from __future__ import annotations

import dataclasses
import inspect
import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from autotune.families import get_family
from autotune.families.tc_wgmma import space_to_depth
from autotune.families.tc_wgmma_memory import ROW_BYTES, half_block, reduction_step, step_bytes
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import device_grid
from autotune.gpu.session import GpuSession, TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.gpu_checks import failures
from tests.nvrtc.test_tc_wgmma import ODD, cfg, nhwc, tma

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)
FAMILY = get_family("tc_wgmma")
# Every loader and pipeline case: one and two consumer warpgroups, m64 tiles one and two a
# warpgroup, the producer warpgroup, split-K, the channel-block order through L1, TMA copies,
# shallow and deep pipelines, every tile width, TMA stores.
CONFIGS = [
    cfg(64, 64, 1, 2),
    cfg(128, 128, 1, 4),
    cfg(128, 96, 2, 5, producer=1),
    cfg(256, 128, 2, 3, c_outer=1, l1=1),
    cfg(128, 192, 2, 3, split=2, producer=1),
    cfg(64, 256, 1, 6, split=4, c_outer=1),
    cfg(128, 64, 1, 3, split=8, producer=1, c_outer=1, l1=1),
    tma(64, 64, 1, 2),
    tma(256, 128, 2, 4, tiles=2),
    tma(128, 96, 1, 5, split=2),
    tma(128, 256, 2, 3),
    # TMA stores: one and two consumer warpgroups, several tiles a block (the staging tile
    # written again while the last tile's stores drain), the edges the map clips.
    tma(64, 64, 1, 2, store=1),
    tma(128, 128, 1, 4, store=1),
    tma(256, 128, 2, 3, tiles=2, store=1),
    # 112 and 224 filters a tile: one and two consumer warpgroups.
    tma(64, 112, 1, 6),
    tma(128, 224, 2, 3),
]
# The odd shapes of the CPU tests and more: B = 1 and 3, N = 1, 7, 13, 37, F = 7, 10, 33, 64, 100,
# C = 3, 5, 8, 12, 16, 20, 40, 64, 96, K = 1, 3, 5, 11, strides 1, 2, 4. C = 12 and 20 are whole
# 16-byte chunks in FP32 (4 floats) but not in 16 bits (8 values): the chunked loads and the
# channel-block order with a partial block in tf32, the element gather in bf16/fp16.
SHAPES = ODD + [
    ConvProblem(N=37, K=5, C=16, F=10, stride=4),
    ConvProblem(N=13, K=3, C=40, F=33, B=3),
    ConvProblem(N=1, K=11, C=64, F=100, B=3),
    ConvProblem(N=13, K=1, C=96, F=100, B=3, stride=2),
    ConvProblem(N=13, K=3, C=12, F=7, B=3, stride=2),
    ConvProblem(N=7, K=5, C=20, F=64, B=1),
    ConvProblem(N=37, K=1, C=40, F=100, B=3),  # a 1x1 input as a matrix, partial in C, M and F
]


def _sixteen_bit_session() -> bool:
    """Whether this checkout's GPU session allocates the problem's storage type (the dtype-gpu
    work of issue 20): without it a 16-bit kernel would read FP32 buffers."""
    return "dtype" in inspect.getsource(GpuSession.fresh_inputs)


@pytest.fixture(scope="module")
def tuner(evaluator, tmp_path_factory):
    if not _sixteen_bit_session():
        pytest.skip("the GPU session has no 16-bit buffers yet (issue 20's dtype-gpu work)")
    if evaluator.device.arch != "sm_90":
        pytest.skip(f"tc_wgmma needs sm_90a (wgmma); this device is {evaluator.device.arch}")
    path = tmp_path_factory.mktemp("gpu_tc_wgmma")
    compiler = Compiler(arch=evaluator.device.arch, cache_dir=path / "cubins")
    compiler.start_pool(os.cpu_count() or 1)
    yield Tuner(
        GpuRunner(compiler, evaluator), Store(str(path / "gpu.db")), strategy="random", timing=QUICK
    )
    compiler.stop_pool()


def one_of_each(configs, kind, rng: random.Random) -> list:
    """One configuration of each kind (`kind(config)`; None: none of these), drawn by `rng`."""
    groups = {}
    for c in configs:
        key = kind(c)
        if key is not None:
            groups.setdefault(key, []).append(c)
    return [rng.choice(group) for group in groups.values()]


def planned(shapes, dtype: str, limits, fused: int | None = None) -> list:
    """Every shape's study in `dtype` (NHWC, its padding kept), and with `fused` the shape of
    that index once more with a fused residual epilogue; each must be planned."""
    problems = [dataclasses.replace(nhwc(p, dtype), padding=p.padding) for p in shapes]
    if fused is not None:
        problems += [dataclasses.replace(problems[fused], epilogue="bias_add_relu")]
    studies, skipped = plan_studies([(FAMILY, p) for p in problems], limits)
    assert len(studies) == len(problems), skipped
    return studies


def some_of_each(studies, kind, rng: random.Random, most: int) -> list:
    """Per study, `most` of one_of_each's configurations at most (none of the kinds is a
    failure), drawn by `rng`: (study, config) pairs."""
    picks = []
    for study in studies:
        chosen = one_of_each(study.space.configs, kind, rng)
        assert chosen, study.label
        picks += [(study, c) for c in rng.sample(chosen, min(most, len(chosen)))]
    return picks


def missing_kinds(studies, picks, kind, rng: random.Random) -> list:
    """One (study, config) of each kind (`kind(config)`; None: none of these) that some study's
    space holds and the picks lack, drawn by `rng`: a draw over a space that grows must not
    lose a case."""
    have = {kind(c) for _, c in picks}
    found = {}
    for study in studies:
        for c in study.space.configs:
            if kind(c) is not None and kind(c) not in have:
                found.setdefault(kind(c), []).append((study, c))
    return [rng.choice(found[k]) for k in sorted(found)]


def compiled_failures(tuner, picks) -> list[str]:
    """The picks (study, config) compiled side by side, then each checked and timed in turn."""
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        compile_ = tuner.runner.compiler.compile
        list(pool.map(lambda p: compile_(FAMILY.plan(p[0].problem, p[1])), picks))
    return failures(tuner, picks, QUICK.min_repeats)


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_odd_shapes_correct_in_every_pipeline_case(tuner, evaluator, dtype):
    problems = [nhwc(p, dtype) for p in SHAPES]
    studies, skipped = plan_studies([(FAMILY, p) for p in problems], evaluator.limits)
    assert len(studies) == len(problems), skipped
    rng = random.Random(dtype)
    picks = []
    for study in studies:
        fixed = [c for c in CONFIGS if study.space.is_valid(c)]
        extra = min(max(1, 3 - len(fixed)), len(study.space.configs))
        configs = fixed + rng.sample(study.space.configs, extra)
        # Where the space holds them, a channel-block-order, a split-K, a TMA, a TMA-store, a
        # 1x1-as-a-matrix and a two-staging-tile config as well.
        for name, least in (
            ("C_OUTER", 1), ("SPLIT_K", 2), ("TMA", 1), ("STORE_TMA", 1), ("GEMM_1X1", 1),
            ("STAGING", 2),
        ):  # fmt: skip
            some = [c for c in study.space.configs if int(c[name]) >= least]
            configs += [rng.choice(some)] if some else []
        picks += [(study, c) for c in dict.fromkeys(configs)]
    assert len(picks) >= 3 * len(studies)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        compile_ = tuner.runner.compiler.compile
        list(pool.map(lambda p: compile_(FAMILY.plan(p[0].problem, p[1])), picks))
    failed = []
    for study, config in picks:
        m = tuner.evaluate(study, config)
        tolerance = FAMILY.tolerance_for(study.problem)
        if m.status is not Status.OK:
            failed.append(f"{study.label} {config}: {m.status.value} {m.error[:300]}")
        else:
            assert m.rel_error is not None and m.rel_error <= tolerance, (study.label, config)
            assert m.time_ms > 0
    assert not failed, "\n".join(failed)

    assert all(set(c.as_dict()) == set(FAMILY.load_space().names) for c in CONFIGS)


# Padded inputs (ConvProblem.padding), read through the im2col map's box from `padding` before
# the image: odd sides, strides 1, 2 and 4, padding 1 to K - 1, batch 1 and 3, C a whole number
# of 16-byte chunks (the TMA path's), F not a multiple of 8; fused epilogues where given.
PADDED = [
    ConvProblem(N=13, K=3, C=64, F=100, B=3, padding=1),
    ConvProblem(N=7, K=3, C=16, F=33, B=1, stride=2, padding=1),
    ConvProblem(N=14, K=7, C=8, F=64, B=3, stride=2, padding=3),
    ConvProblem(N=5, K=5, C=32, F=10, B=3, stride=4, padding=4),
    ConvProblem(N=37, K=3, C=40, F=64, B=1, padding=2),
    ConvProblem(N=7, K=1, C=64, F=96, B=3, stride=2, padding=0),  # the unpadded TMA path beside
    # Padded inputs with rows past the last window (tail), read in place as the runtime passes
    # them (the last two: real rows of the image past it).
    ConvProblem(N=7, K=3, C=16, F=33, B=3, stride=2, padding=1, tail=1),
    ConvProblem(N=7, K=1, C=64, F=96, B=3, stride=2, tail=1),
    ConvProblem(N=5, K=5, C=32, F=10, B=1, stride=4, padding=2, tail=3),
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_padded_inputs_correct_through_the_im2col_box(tuner, evaluator, dtype):
    problems = [dataclasses.replace(nhwc(p, dtype), padding=p.padding, tail=p.tail) for p in PADDED]
    problems += [dataclasses.replace(problems[0], epilogue="bias_add_relu")]
    problems += [dataclasses.replace(problems[2], epilogue="scale_bias_relu")]
    studies, skipped = plan_studies([(FAMILY, p) for p in problems], evaluator.limits)
    assert len(studies) == len(problems), skipped
    rng = random.Random(f"padded-{dtype}")
    picks = []
    for study in studies:
        assert all(int(c["TMA"]) == 1 for c in study.space.configs) or not study.problem.padding
        if study.problem.tail and not study.problem.padding:  # the gather reads a tail too
            gathers = [c for c in study.space.configs if not int(c["TMA"])]
            picks += [(study, c) for c in rng.sample(gathers, min(2, len(gathers)))]
        # Both ways of storing the output beside the padded loads, where the shape allows each.
        for store in (0, 1):
            tma_configs = [
                c
                for c in study.space.configs
                if int(c["TMA"]) == 1 and int(c["STORE_TMA"]) == store
            ]
            picks += [(study, c) for c in rng.sample(tma_configs, min(2, len(tma_configs)))]
    failed = failures(tuner, picks, QUICK.min_repeats)
    assert not failed, "\n".join(failed)


# The consumer warpgroups taking a block's tiles in turn (PINGPONG) need several tiles a block,
# which only problems of more than a wave of tiles are offered: odd sides and channel counts,
# F not a multiple of the tile (and of 8: direct stores only), strides 1 and 2, padding, a 1x1
# layer read as a matrix, batches 3, 13 and 21; the blocks' last tiles fall to either
# warpgroup.
TURNS = [
    ConvProblem(N=37, K=3, C=40, F=100, B=13),
    ConvProblem(N=29, K=3, C=64, F=200, B=21, stride=2, padding=1),
    ConvProblem(N=56, K=1, C=64, F=72, B=3),
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_warpgroups_taking_tiles_in_turn_are_correct(tuner, evaluator, dtype):
    studies = planned(TURNS, dtype, evaluator.limits)
    rng = random.Random(f"pingpong-{dtype}")
    picks = []
    for study in studies:
        # A warpgroup's m64 tiles, the stores, the tiles a block (persistent grids below).
        picks += [
            (study, c)
            for c in one_of_each(
                study.space.configs,
                lambda c: (
                    (int(c["BM"]), int(c["STORE_TMA"]), int(c["STAGING"]), int(c["GEMM_1X1"]))
                    + (int(c["TILES_PER_BLOCK"]),)
                    if int(c["PINGPONG"]) and not int(c["PERSISTENT"])
                    else None
                ),
                rng,
            )
        ]
    assert {int(c["BM"]) for _, c in picks} == {64, 128}
    assert {int(c["TILES_PER_BLOCK"]) for _, c in picks} == {2, 4}
    assert any(int(c["STORE_TMA"]) for _, c in picks)
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_persistent_grids_are_correct(tuner, evaluator, dtype):
    """One block a multiprocessor walking the tiles (PERSISTENT), on TURNS' shapes (more tiles
    than multiprocessors): by cp.async and by TMA, one and two consumer warpgroups, shared tiles
    and tiles in turn, direct and TMA stores; the blocks get different numbers of tiles."""
    studies = planned(TURNS, dtype, evaluator.limits)
    sms = evaluator.limits.SM_COUNT
    rng = random.Random(f"persistent-{dtype}")
    picks = []
    for study in studies:
        picks += [
            (study, c)
            for c in one_of_each(
                study.space.configs,
                lambda c: (
                    (int(c["TMA"]), int(c["WG"]), int(c["PINGPONG"]), int(c["STORE_TMA"]))
                    if int(c["PERSISTENT"])
                    else None
                ),
                rng,
            )
        ]
        (launch,) = FAMILY.plan(study.problem, picks[-1][1]).launches
        # Launched as many blocks as multiprocessors, fewer than the tiles.
        assert device_grid(launch)[0] == sms < launch.grid[0]
    assert {(int(c["TMA"]), int(c["PINGPONG"])) for _, c in picks} == {(0, 0), (1, 0), (1, 1)}
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# Stream-K (STREAM_K): the last wave's tiles shared out by their reduction steps. Fewer tiles than
# multiprocessors (every tile shared: 1x1 layers as matrices and gathered, odd sides and F, the
# short step of a part-full channel block, batch 1 and 3), and more tiles with a remainder (whole
# waves first, then the shared rest), plain and with a fused residual (the whole waves' staged by
# TMA, the shared tiles' read by the last share); every configuration run over and again by the
# timing, whose counters the evaluator finds back at zero.
SHARED = [
    ConvProblem(N=14, K=1, C=1024, F=256, B=32),
    ConvProblem(N=13, K=3, C=40, F=100, B=3),
    ConvProblem(N=7, K=5, C=96, F=72, B=1, padding=2),
    ConvProblem(N=28, K=1, C=256, F=512, B=8),
    ConvProblem(N=37, K=3, C=40, F=104, B=13, padding=1),
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_stream_k_grids_are_correct(tuner, evaluator, dtype):
    studies = planned(SHARED, dtype, evaluator.limits, fused=3)
    sms = evaluator.limits.SM_COUNT
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["WG"]), int(c["BM"]) // 64, int(c["STORE_TMA"]), int(c["STAGING"]))
            + (int(c["GEMM_1X1"]),)
            if int(c["STREAM_K"])
            else None
        ),
        random.Random(f"stream-k-{dtype}"),
        4,
    )
    for study, config in picks:
        (launch,) = FAMILY.plan(study.problem, config).launches
        assert device_grid(launch)[0] == sms  # a block a multiprocessor, whatever the tiles
    assert {int(c["WG"]) for _, c in picks} >= {1, 2}
    assert {int(c["STORE_TMA"]) for _, c in picks} == {0, 1}
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# Clusters of two or four blocks sharing one operand's tile by multicast copies (MULTICAST,
# MULTICAST_BLOCKS): the input (1, groups of filter tiles) or the filters (2, groups of pixel
# tiles), each block copying its part. Counts of the grouped tiles that leave the last group part
# empty (its tiles past the output: F = 192 in 64-wide tiles, 845 pixels in 128-pixel ones), a
# single tile of the other kind, partial tiles in C, M and F, batch 1 and 3, strides 2 and 4,
# padding, 1x1 layers as matrices, a fused residual; grids of tiles, several tiles a block,
# persistent grids (the blocks' last slots waited for before they exit), tiles in turn, split-K.
CLUSTERED = [
    ConvProblem(N=13, K=3, C=64, F=192, B=5),
    ConvProblem(N=13, K=3, C=40, F=100, B=3),
    ConvProblem(N=7, K=5, C=96, F=72, B=1, padding=2),
    ConvProblem(N=13, K=5, C=64, F=104, B=3, stride=2, padding=1),
    ConvProblem(N=13, K=11, C=16, F=64, B=3, stride=4),
    ConvProblem(N=14, K=1, C=1024, F=256, B=32),
    ConvProblem(N=37, K=3, C=40, F=104, B=13, padding=1),
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_clusters_sharing_a_tile_by_multicast_are_correct(tuner, evaluator, dtype):
    studies = planned(CLUSTERED, dtype, evaluator.limits, fused=-1)
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["MULTICAST"]), int(c["MULTICAST_BLOCKS"]), int(c["PERSISTENT"]))
            + (int(c["STORE_TMA"]), int(c["PINGPONG"]), int(c["SPLIT_K"]) > 1)
            + (int(c["TILES_PER_BLOCK"]) > 1,)
            if int(c["MULTICAST"])
            else None
        ),
        rng := random.Random(f"multicast-{dtype}"),
        6,
    )

    # Every sharing kind at least once, whatever the draws (the spaces must hold each).
    def shared(c):
        return (int(c["MULTICAST"]), int(c["MULTICAST_BLOCKS"])) if int(c["MULTICAST"]) else None

    picks += missing_kinds(studies, picks, shared, rng)
    assert {(int(c["MULTICAST"]), int(c["MULTICAST_BLOCKS"])) for _, c in picks} == {
        (1, 2),
        (1, 4),
        (2, 2),
        (2, 4),
    }
    assert any(int(c["PERSISTENT"]) for _, c in picks)
    for study, config in picks:
        (launch, *_) = FAMILY.plan(study.problem, config).launches
        blocks = int(config["MULTICAST_BLOCKS"])
        assert launch.cluster == blocks and device_grid(launch)[0] % blocks == 0
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# Tiles of 112 and 224 filters (BN): multicast pairs and groups sharing either operand, stored
# from registers and by TMA, persistent grids, split-K, at the multicast test's odd shapes
# (F = 72, 100, 104, 192: partial filter tiles; padding; strides 2 and 4; a residual).
@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_tiles_of_112_and_224_filters_are_correct(tuner, evaluator, dtype):
    studies = planned(CLUSTERED, dtype, evaluator.limits, fused=-1)
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["BN"]), int(c["MULTICAST"]), int(c["STORE_TMA"]), int(c["PERSISTENT"]))
            + (int(c["SPLIT_K"]) > 1,)
            if int(c["BN"]) in (112, 224)
            else None
        ),
        random.Random(f"wide-{dtype}"),
        4,
    )
    assert {int(c["BN"]) for _, c in picks} == {112, 224}
    assert any(int(c["MULTICAST"]) for _, c in picks)
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# Rows of outputs that are not whole 128-byte panels stored by TMA, the rest of a row through a
# tail panel's map (16-bit BN = 96, 112 and 224, FP32 112): partial filter and pixel tiles (F =
# 72, 104, 520; B*N*N = 147, 245), padding, stride 2, a 1x1 input as a matrix, a fused residual
# loaded the same way, two staging tiles, stream-K's shared tiles, multicast, one to three
# consumer warpgroups.
TAILED = [
    ConvProblem(N=13, K=3, C=64, F=192, B=5),
    ConvProblem(N=7, K=5, C=96, F=72, B=1, padding=2),
    ConvProblem(N=7, K=1, C=2048, F=520, B=3),
    ConvProblem(N=13, K=5, C=64, F=104, B=3, stride=2, padding=1),
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_tail_panels_stored_by_tma_are_correct(tuner, evaluator, dtype):
    studies = planned(TAILED, dtype, evaluator.limits, fused=-1)
    panel_cols = 128 // nhwc(TAILED[0], dtype).precision.bytes
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["BN"]), int(c["WG"]), int(c["STAGING"]), int(c["STREAM_K"]))
            + (int(c["MULTICAST"]) > 0,)
            if int(c["STORE_TMA"]) and int(c["BN"]) % panel_cols
            else None
        ),
        random.Random(f"tail-{dtype}"),
        5,
    )
    assert {int(c["BN"]) for _, c in picks} == ({112} if dtype == "tf32" else {96, 112, 224})
    assert any(s.problem.fused for s, _ in picks)
    assert any(int(c["STAGING"]) == 2 for _, c in picks)
    assert any(int(c["STREAM_K"]) for _, c in picks)
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# A split tile's blocks as one cluster (SPLIT_CLUSTER), the first adding the others' accumulators
# over distributed shared memory: long reductions at few tiles (ResNet-50's 7x7 C = 2048 at batch
# 3), partial tiles in M and F (F = 100, 40, 7), C not a whole step (72, 40), batch 1 and 3, N = 5,
# 7, 13 and 37, strides 2 and 4, padding, a 1x1 input as a matrix, a half-full last channel
# block, a fused residual; two, four and eight splits (uneven ones too), one to three consumer
# warpgroups, stored directly and by TMA.
SPLIT_IN_CLUSTER = [
    ConvProblem(N=7, K=1, C=2048, F=512, B=3),
    ConvProblem(N=7, K=3, C=256, F=100, B=1, padding=1),
    ConvProblem(N=13, K=3, C=72, F=40, B=3, stride=2),
    ConvProblem(N=5, K=11, C=16, F=64, B=3, stride=4, padding=2),
    ConvProblem(N=37, K=1, C=1000, F=7, B=1),
    ConvProblem(N=7, K=5, C=40, F=104, B=1, padding=2),
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_a_split_tiles_blocks_adding_up_in_their_cluster_are_correct(tuner, evaluator, dtype):
    studies = planned(SPLIT_IN_CLUSTER, dtype, evaluator.limits, fused=0)
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["SPLIT_K"]), int(c["WG"]), int(c["STORE_TMA"]), int(c["GEMM_1X1"]))
            if int(c["SPLIT_CLUSTER"])
            else None
        ),
        random.Random(f"split-cluster-{dtype}"),
        5,
    )
    assert {int(c["SPLIT_K"]) for _, c in picks} == {2, 4, 8}
    assert {int(c["STORE_TMA"]) for _, c in picks} == {0, 1}
    assert {int(c["WG"]) for _, c in picks} == {1, 2, 3}
    assert any(s.problem.fused for s, _ in picks)
    for study, config in picks:
        (launch,) = FAMILY.plan(study.problem, config).launches
        assert launch.cluster == int(config["SPLIT_K"]) and launch.grid[2] == 1
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# A last channel block at most half full, copied at half width (HALF_BLOCK): C = 96, 72 and 24 in
# 16 bits (64 + 32, 64 + 8, a lone half block), C = 72, 40 and 104 in tf32 (64 + 8, 32 + 8,
# 96 + 8); batch 1, 3 and 21, N = 7, 13, 29 and 37, strides 2 and 4, padding, a 1x1 input as a
# matrix, a fused residual; one to three consumer warpgroups, tiles in turn, clusters,
# persistent grids, stream-K, split-K. A shape whose last block is not half full in a dtype is
# left out of it.
HALVED = [
    ConvProblem(N=7, K=5, C=96, F=72, B=1, padding=2),
    ConvProblem(N=13, K=3, C=72, F=100, B=3, stride=2),
    ConvProblem(N=13, K=3, C=40, F=100, B=3),
    ConvProblem(N=37, K=1, C=96, F=104, B=3),
    ConvProblem(N=13, K=5, C=24, F=64, B=3, stride=4, padding=1),
    ConvProblem(N=7, K=3, C=104, F=40, B=3, stride=2),
    ConvProblem(N=29, K=3, C=72, F=200, B=21, stride=2, padding=1),  # past a wave of tiles
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_a_half_full_last_channel_block_copied_at_half_width_is_correct(tuner, evaluator, dtype):
    studies = [
        s for s in planned(HALVED, dtype, evaluator.limits, fused=0)
        if 0 < s.problem.C % reduction_step(s.problem) <= reduction_step(s.problem) // 2
    ]  # fmt: skip
    assert len(studies) >= 4
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["WG"]), int(c["PINGPONG"]), int(c["MULTICAST"]), int(c["PERSISTENT"]))
            + (int(c["STREAM_K"]), int(c["SPLIT_K"]) > 1, int(c["STORE_TMA"]), int(c["GEMM_1X1"]))
            # 64-byte steps and the filters on wgmma's M copy no half block (half_block)
            if int(c["TMA"]) and step_bytes(c) == ROW_BYTES and not int(c["FILTERS_M"])
            else None
        ),
        random.Random(f"half-{dtype}"),
        8,
    )
    # Every draw copies its last channel block at half width, but stream-K at 256 filters a tile,
    # which keeps the full box (half_block): such a draw tests nothing here.
    full_box = [(s, c) for s, c in picks if not half_block(s.problem, c)]
    assert all(int(c["STREAM_K"]) and int(c["BN"]) == 256 for _, c in full_box)
    picks = [pick for pick in picks if pick not in full_box]
    for name in ("PINGPONG", "MULTICAST", "PERSISTENT", "STREAM_K", "STORE_TMA", "GEMM_1X1"):
        assert any(int(c[name]) for _, c in picks) or name == "GEMM_1X1" and dtype == "tf32", name
    assert {int(c["WG"]) for _, c in picks} == {1, 2, 3}
    assert any(int(c["SPLIT_K"]) > 1 for _, c in picks)
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# 64-byte steps of the reduction (STEP_BYTES = 64: 32 16-bit or 16 FP32 elements a step, the
# 64-byte swizzle): C = 96 in whole steps in 16 bits, C = 40, 72, 24 and 104 with a last step
# part full (one wgmma of two, or in tf32 one of two again: 40 = 2 x 16 + 8), C = 8 in tf32
# (half a step); batch 1, 3 and 21, N = 7, 13, 29 and 37, strides 2 and 4, padding, a 1x1
# input as a matrix, a fused residual; one to three consumer warpgroups, tiles in turn,
# clusters, persistent grids, stream-K, split-K.
NARROWED = [
    ConvProblem(N=7, K=5, C=96, F=72, B=1, padding=2),
    ConvProblem(N=13, K=3, C=40, F=100, B=3),
    ConvProblem(N=37, K=1, C=72, F=104, B=3),
    ConvProblem(N=13, K=5, C=24, F=64, B=3, stride=4, padding=1),
    ConvProblem(N=7, K=3, C=104, F=40, B=3, stride=2),
    ConvProblem(N=13, K=3, C=8, F=33, B=3),
    ConvProblem(N=29, K=3, C=72, F=200, B=21, stride=2, padding=1),  # past a wave of tiles
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_64_byte_steps_are_correct(tuner, evaluator, dtype):
    studies = planned(NARROWED, dtype, evaluator.limits, fused=2)
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["WG"]), int(c["PINGPONG"]), int(c["MULTICAST"]), int(c["PERSISTENT"]))
            + (int(c["STREAM_K"]), int(c["SPLIT_K"]) > 1, int(c["STORE_TMA"]), int(c["GEMM_1X1"]))
            if step_bytes(c) == 64
            else None
        ),
        random.Random(f"narrow64-{dtype}"),
        4,
    )
    assert {int(c["TMA"]) for _, c in picks} == {1} and not any(
        half_block(s.problem, c) for s, c in picks
    )
    for name in ("PINGPONG", "MULTICAST", "PERSISTENT", "STREAM_K", "STORE_TMA", "GEMM_1X1"):
        assert any(int(c[name]) for _, c in picks), name
    assert {int(c["WG"]) for _, c in picks} == {1, 2, 3}
    assert any(int(c["SPLIT_K"]) > 1 for _, c in picks) and any(s.problem.fused for s, _ in picks)
    # A last step part full (the short step's path) in every dtype.
    assert any(s.problem.C % reduction_step(s.problem, c) for s, c in picks)
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# Three consumer warpgroups of 64 rows (WG = 3, 192-pixel tiles): a 1x1 layer whose grid is one
# wave (132 tiles), pixel counts that leave the last tile part full (147, 507, 17,661, 17,797),
# C, F and the last filter tile partial, padding, strides 1 and 2, batch 3, 13, 21 and 32, a
# fused residual; grids of tiles, persistent grids, stream-K, clusters, split-K, both stores.
THREE = [
    ConvProblem(N=14, K=1, C=1024, F=256, B=32),
    ConvProblem(N=13, K=3, C=40, F=100, B=3),
    ConvProblem(N=29, K=3, C=64, F=200, B=21, stride=2, padding=1),
    ConvProblem(N=37, K=3, C=40, F=104, B=13, padding=1),
    ConvProblem(N=7, K=5, C=96, F=72, B=3, padding=2),
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_three_consumer_warpgroups_are_correct(tuner, evaluator, dtype):
    studies = planned(THREE, dtype, evaluator.limits, fused=2)
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["BN"]), int(c["STORE_TMA"]), int(c["STAGING"]), int(c["PERSISTENT"]))
            + (int(c["STREAM_K"]), int(c["MULTICAST"]), int(c["SPLIT_K"]) > 1)
            + (int(c["GEMM_1X1"]),)
            if int(c["WG"]) == 3 and not int(c["FILTERS_M"])
            else None
        ),
        random.Random(f"three-{dtype}"),
        6,
    )
    assert {int(c["BM"]) for _, c in picks} == {192}
    assert {int(c["STORE_TMA"]) for _, c in picks} == {0, 1}
    for name in ("PERSISTENT", "STREAM_K", "MULTICAST"):
        assert any(int(c[name]) for _, c in picks), name

    # 192 x 192 tiles (96 accumulators a consumer thread), stored from registers: two a study
    # where F allows them.
    def wide_kind(c):
        if int(c["WG"]) == 3 and int(c["BN"]) == 192 and not int(c["FILTERS_M"]):
            return tuple(int(c[n]) for n in ("PERSISTENT", "STREAM_K", "MULTICAST", "SPLIT_K"))
        return None

    wide = some_of_each(
        [s for s in studies if any(wide_kind(c) for c in s.space.configs)],
        wide_kind,
        random.Random(f"three-wide-{dtype}"),
        2,
    )
    assert len(wide) >= 8 and {int(c["STORE_TMA"]) for _, c in wide} == {0}
    picks += wide
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# Strided layers whose C fills no 16-byte chunk, computed as their space-to-depth rewrite (a
# launch of its own writing the stride x stride blocks as channels, then the main kernel on
# them): first layers as PyTorch passes them (padding, a tail row: ResNet-50's 7x7/2) and
# pre-padded (AlexNet's 11x11/4), strides 2, 3 and 4, C = 3 and 5 (and 12 in 16 bits), K = 3, 5,
# 7 and 11, N = 5, 7, 13 and 37, batch 1 and 3, F = 10, 24, 33, 64 and 100, fused epilogues;
# gathers, channel blocks, TMA loads and stores, split-K, stream-K, clusters.
REWRITTEN = [
    ConvProblem(N=7, K=7, C=3, F=24, B=3, stride=2, padding=3, tail=1),
    ConvProblem(N=13, K=7, C=3, F=64, B=1, stride=2, padding=3),
    ConvProblem(N=5, K=11, C=3, F=10, B=3, stride=4, padding=2, tail=3),
    ConvProblem(N=13, K=11, C=3, F=100, B=3, stride=4),
    ConvProblem(N=7, K=5, C=5, F=33, B=3, stride=3, padding=2),
    ConvProblem(N=37, K=3, C=3, F=64, B=1, stride=2, padding=1, tail=1),
    ConvProblem(N=13, K=3, C=12, F=64, B=3, stride=2),  # whole chunks in tf32 only
    ConvProblem(N=7, K=11, C=3, F=64, B=1, stride=2),  # 6 taps of 16 channels: split-K too
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_strided_layers_rewritten_as_space_to_depth_are_correct(tuner, evaluator, dtype):
    problems = [
        dataclasses.replace(nhwc(p, dtype), padding=p.padding, tail=p.tail) for p in REWRITTEN
    ]
    problems += [dataclasses.replace(problems[0], epilogue="bias_add_relu")]
    problems += [dataclasses.replace(problems[3], epilogue="scale_bias_relu")]
    studies, skipped = plan_studies([(FAMILY, p) for p in problems], evaluator.limits)
    assert len(studies) == len(problems), skipped
    studies = [s for s in studies if space_to_depth(s.problem) is not None]
    assert len(studies) >= 7
    picks = some_of_each(
        studies,
        lambda c: (
            int(c["TMA"]),
            int(c["C_OUTER"]),
            int(c["STORE_TMA"]),
            int(c["SPLIT_K"]) > 1,
            int(c["STREAM_K"]),
            int(c["MULTICAST"]) > 0,
            int(c["WG"]),
        ),  # fmt: skip
        random.Random(f"s2d-{dtype}"),
        6,
    )
    # And a split one of each study that has them (its partial sums summed by a third launch).
    rng = random.Random(f"s2d-split-{dtype}")
    for study in studies:
        split = [c for c in study.space.configs if int(c["SPLIT_K"]) > 1]
        picks += [(study, rng.choice(split))] if split else []
    for name in ("TMA", "C_OUTER", "STORE_TMA", "STREAM_K", "MULTICAST"):
        assert any(int(c[name]) for _, c in picks), name
    assert any(int(c["SPLIT_K"]) > 1 for _, c in picks)
    assert any(not int(c["C_OUTER"]) for _, c in picks)  # the reduction order's copies
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


# The filters as wgmma's M (FILTERS_M) and the pixels its N, stored transposed through the
# staging tile: pixel tiles of 64 to 256 among them 96, 112 and 224 (not whole m64 tiles), one
# to three consumer warpgroups of 64 filters, pixel and filter tiles part full (B*N*N = 507,
# 1,369, 147, 75; F = 104, 200, 72), C not a whole step (40), padding, strides 2 and 4, batch 1
# and 3, a 1x1 input as a matrix, persistent grids and pairs sharing the pixel tile.
FILTERS_ON_M = [
    ConvProblem(N=14, K=1, C=1024, F=256, B=32),
    ConvProblem(N=13, K=3, C=40, F=104, B=3, stride=2),
    ConvProblem(N=37, K=3, C=64, F=200, B=1, padding=1),
    ConvProblem(N=7, K=5, C=96, F=72, B=3, padding=2),
    ConvProblem(N=5, K=11, C=16, F=64, B=3, stride=4, padding=2),
]


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_the_filters_on_wgmmas_m_are_correct(tuner, evaluator, dtype):
    studies = planned(FILTERS_ON_M, dtype, evaluator.limits)
    picks = some_of_each(
        studies,
        lambda c: (
            (int(c["BM"]), int(c["WG"]), int(c["MULTICAST"]) > 0, int(c["PERSISTENT"]))
            if int(c["FILTERS_M"])
            else None
        ),
        random.Random(f"filters-m-{dtype}"),
        6,
    )
    picks += missing_kinds(
        studies, picks, lambda c: int(c["BM"]) if int(c["FILTERS_M"]) else None,
        random.Random(f"filters-m-widths-{dtype}"),
    )  # fmt: skip
    assert {int(c["BM"]) for _, c in picks} == {64, 96, 112, 128, 192, 224, 256}
    assert {int(c["WG"]) for _, c in picks} == {1, 2, 3}
    assert any(int(c["MULTICAST"]) for _, c in picks)
    assert any(int(c["PERSISTENT"]) for _, c in picks)
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)
