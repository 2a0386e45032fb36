"""On a CUDA device: implicit_gemm correct with rows interleaved in a warp (GATHER_ROWS > 1)."""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import TimingPolicy
from autotune.model.space import Config
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.gpu_checks import failures
from tests.nvrtc.test_implicit_gemm import STRIDED
from tests.nvrtc.test_implicit_gemm_gather import PROBED

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)
FAMILY = get_family("implicit_gemm")


@pytest.fixture(scope="module")
def tuner(evaluator, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu_ig_gather")
    # A disk cache, so that the candidates compiled ahead in parallel below are not compiled again.
    compiler = Compiler(arch=evaluator.device.arch, cache_dir=path / "cubins")
    compiler.start_pool(os.cpu_count() or 1)
    yield Tuner(
        GpuRunner(compiler, evaluator), Store(str(path / "gpu.db")), strategy="random", timing=QUICK
    )
    compiler.stop_pool()


def test_interleaved_gather_correct_in_every_loader_case(tuner, evaluator):
    """The configurations the CPU tests emulate and compile (every case of the loader, ragged
    columns and reductions, stride 4 and 2, split-K, the offset table, both bufferings) and 6
    random ones with rows interleaved per strided shape, each at 1, 2 and 4 rows where valid."""
    cases: dict = {}
    for problem, values in PROBED:
        cases.setdefault(problem, []).append(values)
    for problem, tile, rows in STRIDED:
        for db in (0, 1):
            cases.setdefault(problem, []).append(
                {**tile, "GATHER_ROWS": rows, "DOUBLE_BUFFER": db, "SPLIT_K": 1, "OFFSET_TABLE": db}
            )
    rng = random.Random(5)
    studies, skipped = plan_studies([(FAMILY, p) for p in cases], evaluator.limits)
    assert len(studies) == len(cases), skipped
    picks = []
    for study in studies:
        interleaved = [c for c in study.space.configs if c["GATHER_ROWS"] > 1]
        configs = [Config.of(v) for v in cases[study.problem]]
        configs += rng.sample(interleaved, min(6, len(interleaved)))
        configs = [
            twin
            for c in configs
            for g in (1, 2, 4)
            if study.space.is_valid(twin := Config.of({**c.as_dict(), "GATHER_ROWS": g}))
        ]
        picks += [(study, config) for config in dict.fromkeys(configs)]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        compile_ = tuner.runner.compiler.compile
        list(pool.map(lambda p: compile_(FAMILY.plan(p[0].problem, p[1])), picks))
    failed = failures(tuner, picks)
    assert not failed, "\n".join(failed)
