"""`autotune run` with a fused epilogue on the synthetic GPU: the study is planned, compiled
(NVRTC) with the epilogue in, checked against the reference that applies it, and stored under
its own key; no cuDNN baseline (it applies no epilogue); families without one say why."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import autotune.gpu.evaluator
from autotune.cli.app import main
from autotune.store import Store
from tests.conftest import SyntheticEvaluator

SHAPE = "N=13,K=3,C=64,F=96,B=2,dtype=bf16,layout=NHWC,epilogue=bias_relu"


@pytest.fixture
def fake_gpu(monkeypatch):
    made = []

    def factory(index=0):
        made.append(SyntheticEvaluator(lambda d: 1.0 + d.get("BM", 64) / 256))
        return made[-1]

    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", factory)
    return made


def test_run_plans_a_fused_study_for_tc_wgmma(tmp_path, fake_gpu):
    db = str(tmp_path / "r.db")
    args = ["run", "--shape", SHAPE, "--family", "tc_wgmma", "--budget", "3", "--storage", db]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert result.exit_code == 0, result.output
    assert "3 new evaluations" in result.output and SHAPE in result.output
    ev = fake_gpu[-1]
    assert [type(t).__name__ for t in ev.tasks] == ["MeasureCeilings"]  # no cuDNN baseline
    for job in ev.jobs:
        defines = dict(job.plan.defines)
        assert (defines["EPILOGUE"], defines["EPI_BIAS"], defines["EPI_ACT"]) == (1, 1, 1)
        assert defines["EPI_SCALE"] == defines["EPI_RESIDUAL"] == 0
        assert [n for n, _ in job.check.buffers.inputs] == ["x", "w", "bias"]
        assert [la.kernel for la in job.check.reference_plan.launches] == [
            "reference_conv2d",
            "reference_epilogue",
        ]
    with Store(db) as store:
        best = store.best()
    assert best["problem_key"].tolist() == [SHAPE]


def test_a_family_without_epilogues_skips_the_shape_in_one_line(tmp_path, fake_gpu):
    shape = "N=13,K=3,C=64,F=96,epilogue=bias_relu"
    args = ["run", "--shape", shape, "--family", "implicit_gemm", "--storage", str(tmp_path / "r")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "applies no fused epilogue: not bias_relu" in result.output


def test_an_unknown_epilogue_is_a_one_line_error(tmp_path):
    args = ["run", "--shape", "N=13,K=3,C=64,F=96,epilogue=bias_rleu", "--storage", str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "unknown epilogue 'bias_rleu'" in result.output and "Traceback" not in result.output
