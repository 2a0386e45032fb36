"""On a CUDA device (Hopper) with nvcc: an export of plans in every dtype and layout builds and its
example matches the float64 reference on the GPU: tc_wgmma in bf16 and fp16 with TMA tensor maps
(which the C++ call encodes; one in clusters of two), tc_implicit_gemm in tf32, and the FP32 NCHW
path of before (implicit_gemm), each measured here and stored, then exported."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autotune.export import select
from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner, register_device
from tests.nvrtc.test_tc_wgmma import nhwc, tma
from tests.system.test_export_nvcc import build_tree, nvcc

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)


def test_an_export_in_every_dtype_runs_and_matches_float64(evaluator, tmp_path: Path) -> None:
    nvcc()  # skips (or, in CI, fails) without nvcc before the GPU work
    if evaluator.device.arch != "sm_90":
        pytest.skip(f"tc_wgmma needs sm_90a; this device is {evaluator.device.arch}")
    cases = [
        ("tc_wgmma", nhwc(ConvProblem(N=14, K=3, C=64, F=128, B=2), "bf16"), tma(128, 128, 1, 4)),
        ("tc_wgmma", nhwc(ConvProblem(N=13, K=1, C=64, F=96, B=3), "fp16"), tma(64, 96, 1, 4)),
        # A persistent grid: 140 tiles, so the C++ launch caps x at the multiprocessors.
        (
            "tc_wgmma",
            nhwc(ConvProblem(N=37, K=3, C=40, F=104, B=13), "bf16"),
            tma(128, 128, 2, 4, store=1, persistent=1),
        ),
        # Clusters of two sharing the input by multicast copies, persistent: the cap is whole
        # clusters (160 tiles).
        (
            "tc_wgmma",
            nhwc(ConvProblem(N=28, K=3, C=64, F=256, B=13), "fp16"),
            tma(128, 128, 2, 4, store=1, persistent=1, multicast=1),
        ),
        # 112 filters a tile stored by TMA: a 128-byte panel and a tail panel through an
        # unswizzled map, which the C++ tree encodes as the launcher does (F = 232: a partial
        # filter tile).
        (
            "tc_wgmma",
            nhwc(ConvProblem(N=7, K=1, C=256, F=232, B=3), "fp16"),
            tma(64, 112, 1, 4, store=1, gemm_1x1=1),
        ),
        # A strided first layer: its space-to-depth rewrite's launch, then the main kernel on
        # the rewrite's scratch.
        (
            "tc_wgmma",
            nhwc(ConvProblem(N=13, K=7, C=3, F=64, B=2, stride=2), "bf16"),
            tma(128, 64, 1, 4, store=1),
        ),
        ("tc_implicit_gemm", nhwc(ConvProblem(N=13, K=3, C=40, F=33, B=3, stride=2), "tf32"), None),
        ("implicit_gemm", ConvProblem(N=13, K=5, C=16, F=24, B=2), None),
    ]
    store = Store(str(tmp_path / "export.db"))
    runner = GpuRunner(
        Compiler(arch=evaluator.device.arch, cache_dir=tmp_path / "cubins"), evaluator
    )
    tuner = Tuner(runner, store, strategy="random", timing=QUICK)
    device_id = register_device(store, runner)
    run_id = store.start_run(device_id, "test_gpu_export", {})
    pairs = [(get_family(name), problem) for name, problem, _ in cases]
    studies, skipped = plan_studies(pairs, evaluator.limits)
    assert len(studies) == len(cases), skipped
    chosen = {(name, problem.key): config for name, problem, config in cases}
    for study in studies:
        config = chosen[(study.family.name, study.problem.key)] or study.space.configs[0]
        assert study.space.is_valid(config), (study.label, config)
        m = tuner.evaluate(study, config)
        assert m.status is Status.OK, (study.label, m.error)
        store.record(
            run_id, device_id, study.family.name, study.problem, config, m, study.problem.flops
        )
    selection = select(store)
    store.close()
    assert len(selection.plans) == len(cases) and selection.excluded == ()
    tree = tmp_path / "tree"
    build_tree(selection, tree, "test_gpu_export", jobs=8)
    ran = subprocess.run(
        [str(tree / "build" / "example")], cwd=tree, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    assert f"{len(cases)} of {len(cases)} plans matched" in ran.stdout, ran.stdout
    for dtype in ("bf16", "fp16", "tf32", "fp32"):
        assert f" {dtype} " in ran.stdout
