"""On a CUDA device: the example kernel directory's family, evaluated by the real GPU worker,
is correct against the float64 reference at sampled configs of odd and example shapes, and a
short `autotune run --kernels` stores OK results for it."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.families import with_directories
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.gpu_checks import failures

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "direct_conv2d"
SHAPES = [
    ConvProblem(N=64, K=3, C=16, F=32),  # the README's command
    ConvProblem(N=37, K=3, C=1, F=3),
    ConvProblem(N=29, K=5, C=7, F=9),
    ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2),
]


def test_example_family_correct_on_sampled_configs(evaluator, tmp_path):
    family = with_directories([EXAMPLE])["direct_conv2d"]
    compiler = Compiler(arch=evaluator.device.arch)
    store = Store(str(tmp_path / "g.db"))
    tuner = Tuner(GpuRunner(compiler, evaluator), store, strategy="random", timing=QUICK)
    studies, skipped = plan_studies([(family, p) for p in SHAPES], evaluator.limits)
    assert not skipped and len(studies) == len(SHAPES)
    rng = random.Random(11)
    picks = [
        (study, config)
        for study in studies
        for config in rng.sample(study.space.configs, min(5, len(study.space)))
    ]
    failed = failures(tuner, picks, QUICK.min_repeats)
    assert not failed, "\n".join(failed)


def test_run_with_kernels_stores_ok_results(tmp_path):
    db = str(tmp_path / "r.db")
    args = ["run", "--kernels", str(EXAMPLE), "--family", "direct_conv2d"]
    args += ["--shape", "N=64,K=3,C=16,F=32", "--budget", "4", "--quick-timing", "--no-baseline"]
    args += ["--storage", db, "--cache-dir", str(tmp_path / "cubins")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "4 new evaluations" in result.output and "| direct_conv2d" in result.output
    with sqlite3.connect(db) as conn:
        query = "SELECT status FROM evaluations WHERE family = 'direct_conv2d'"
        statuses = [status for (status,) in conn.execute(query)]
    assert statuses == [Status.OK.value] * 4, statuses
