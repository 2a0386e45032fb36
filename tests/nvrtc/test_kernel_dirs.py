"""The example kernel directory without a GPU: NVRTC compiles its plans at sampled configs, and
`families`, `space` and `run --kernels` (on the synthetic GPU) take it from the command line."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from click.testing import CliRunner

import autotune.gpu.evaluator
from autotune.cli.app import main
from autotune.families import with_directories
from autotune.model.problem import ConvProblem
from autotune.model.space import ARCH_LIMITS
from tests.conftest import SyntheticEvaluator

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "direct_conv2d"
SHAPES = [
    ConvProblem(N=64, K=3, C=16, F=32),
    ConvProblem(N=29, K=5, C=7, F=9, B=2),
    ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2),
    ConvProblem(N=8, K=1, C=1, F=1),
]


@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_the_example_compiles_at_sampled_configs(compiler, problem):
    family = with_directories([EXAMPLE])["direct_conv2d"]
    bound = family.load_space().bind(problem.fields(), ARCH_LIMITS["sm_90"])
    assert len(bound)
    for config in random.Random(3).sample(bound.configs, min(4, len(bound))):
        plan = family.plan(problem, config)
        compiled = compiler.compile(plan)
        assert set(compiled.resources) == {"direct_conv2d"}, config
        (launch,) = plan.launches
        assert launch.block[0] * launch.block[1] <= 1024
        assert launch.grid[2] == problem.B * problem.F


def test_families_and_space_take_kernel_directories_from_option_and_environment():
    runner = CliRunner()
    listed = runner.invoke(main, ["families", "--kernels", str(EXAMPLE)])
    assert listed.exit_code == 0, listed.output
    assert "direct_conv2d: direct NCHW convolution" in listed.output
    assert "UNROLL [1, 2, 4, 9]" in listed.output and "direct_naive" in listed.output
    assert "direct_conv2d" not in runner.invoke(main, ["families"]).output
    env = {"AUTOTUNE_KERNELS": f"{EXAMPLE}"}
    shown = runner.invoke(
        main, ["space", "direct_conv2d", "--shape", "N=64,K=3,C=16,F=32"], env=env
    )
    assert shown.exit_code == 0, shown.output
    assert "direct_conv2d N=64,K=3,C=16,F=32 on sm_90: 84 valid of 100" in shown.output


def test_a_bad_kernel_directory_ends_the_command_in_one_line(tmp_path):
    (tmp_path / "mine.cu").write_text("")
    (tmp_path / "mine.toml").write_text('[parameters]\nX = [1]\n[family]\nkind = "fft"\n')
    result = CliRunner().invoke(main, ["families", "--kernels", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"autotune: {tmp_path / 'mine.toml'}: family.kind: 'fft' is not one of conv2d, gemm, conv3d"
    )


def test_space_compile_of_a_kernel_that_does_not_compile_says_so_in_one_line(tmp_path):
    (tmp_path / "mine.cu").write_text("__global__ void k( { \x1b[31m\n")
    toml = (EXAMPLE / "direct_conv2d.toml").read_text()
    (tmp_path / "mine.toml").write_text(toml.replace('"direct_conv2d"', '"k"'))
    args = ["space", "mine", "--kernels", str(tmp_path), "--shape", "N=8,K=1,C=1,F=1"]
    result = CliRunner().invoke(main, [*args, "--samples", "2", "--compile"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "\x1b" not in result.output
    lines = result.output.strip().splitlines()
    assert [ln.split("->")[1].split(":")[0] for ln in lines[1:3]] == [" compile error"] * 2
    assert lines[-1].startswith("autotune: 2 of 2 samples did not compile: mine.cu(1): error")


@pytest.mark.slow
def test_run_tunes_a_family_of_a_kernel_directory_on_a_synthetic_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(
        autotune.gpu.evaluator,
        "GpuEvaluator",
        lambda index=0: SyntheticEvaluator(lambda d: 1.0 + d["BLOCK_X"] / 64 + d["UNROLL"] / 8),
    )
    db = str(tmp_path / "r.db")
    args = ["run", "--kernels", str(EXAMPLE), "--family", "direct_conv2d"]
    args += ["--shape", "N=64,K=3,C=16,F=32", "--budget", "6", "--storage", db]
    args += ["--cache-dir", str(tmp_path / "cubins")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "6 new evaluations" in result.output and "| direct_conv2d" in result.output
    best = CliRunner().invoke(main, ["best", "--format", "csv", "--storage", db])
    assert "Synthetic GPU,direct_conv2d,1,64,3,16,32" in best.output, best.output
    # The commands that name a family take the kernel directories too, to know its name.
    only = ["best", "--family", "direct_conv2d", "--format", "csv", "--storage", db]
    assert "unknown family 'direct_conv2d'" in CliRunner().invoke(main, only).output
    only = CliRunner().invoke(main, [*only, "--kernels", str(EXAMPLE)])
    assert only.exit_code == 0 and only.output.count("direct_conv2d") == 1, only.output
    forget = ["forget", "--family", "direct_conv2d", "--yes", "--storage", db]
    forgot = CliRunner().invoke(main, forget, env={"AUTOTUNE_KERNELS": str(EXAMPLE)})
    assert "deleted 6 evaluations" in forgot.output, forgot.output
