"""A tuned kernel of one's own without a GPU: tune_kernel against a synthetic evaluator, then
tuned_kernel compiles the stored best with NVRTC and `autotune export --format kernel` writes
its header and JSON; launching is the GPU test's (tests/gpu/test_gpu_tuned_kernel.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import autotune
import autotune.kt
from autotune.cli.app import main
from autotune.gpu.compiler import ELF_MAGIC
from autotune.kt import api
from autotune.kt.api import tune_kernel
from autotune.kt.tuned import NoTunedKernel, tuned_kernel
from tests.conftest import SyntheticEvaluator

SOURCE = """
__global__ void scale(float *y, const float *x, float factor, int n) {
    int i = (blockIdx.x * block_size_x + threadIdx.x) * ITEMS;
    for (int k = 0; k < ITEMS; k++) {
        if (i + k < n) y[i + k] = factor * x[i + k];
    }
}
"""
TUNE = {"block_size_x": [64, 128, 256], "ITEMS": [1, 2, 4]}
BEST = {1000: {"block_size_x": 128, "ITEMS": 2}, 5000: {"block_size_x": 256, "ITEMS": 4}}


@pytest.fixture(autouse=True)
def _nvrtc_and_scratch(compiler, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "CACHE_ROOT", tmp_path / "cache")


def scale_args(n: int):
    x = np.linspace(-1, 1, n, dtype=np.float32)
    return [np.zeros_like(x), x, np.float32(3), np.int32(n)], [3 * x, None, None, None]


def cost(n: int):
    best = BEST[n]
    return lambda d: 1.0 + sum(abs(d[k] - v) / v for k, v in best.items())


def tune(tmp_path, n: int, name: str = "Synthetic GPU", **extra):
    arguments, answer = scale_args(n)
    options = dict(answer=answer, storage=str(tmp_path / "r.db"), compiler_cache=None, quiet=True)
    return tune_kernel(
        "scale",
        SOURCE,
        n,
        arguments,
        TUNE,
        evaluator=SyntheticEvaluator(cost(n), name=name),
        **{**options, **extra},
    )


def lookup(tmp_path, n: int, **extra):
    arguments, _ = scale_args(n)
    return tuned_kernel(
        "scale",
        SOURCE,
        n,
        arguments,
        TUNE,
        storage=str(tmp_path / "r.db"),
        compiler_cache=None,
        **extra,
    )


def test_the_stored_best_compiled_with_its_launch(tmp_path):
    for n in BEST:
        tune(tmp_path, n)
    kernel = lookup(tmp_path, 1000)
    assert kernel.config == BEST[1000] and kernel.time_ms == 1.0
    assert kernel.block == (128, 1, 1) and kernel.grid == (8, 1, 1)  # Kernel Tuner's: 1000/128
    assert kernel.smem_bytes == 0 and kernel.arch == "sm_90"
    assert kernel.defines["ITEMS"] == 2 and kernel.defines["grid_size_x"] == 8
    assert kernel.cubin.startswith(ELF_MAGIC) and kernel.device == "Synthetic GPU"
    assert kernel.study.startswith("scale X=1000,Y=1,Z=1,args=")
    other = lookup(tmp_path, 5000)
    assert other.config == BEST[5000] and other.grid == (20, 1, 1)
    with pytest.raises(TypeError, match="scale takes 4 arguments, 2 given"):
        kernel(1, 2)  # checked before CuPy is touched
    assert autotune.tuned_kernel is tuned_kernel and autotune.kt.tuned_kernel is tuned_kernel


def test_the_stored_best_is_compiled_outside_the_callers_process(tmp_path, monkeypatch):
    # NVRTC's own SIGINT handler, during a compile in the caller's process, would end a
    # notebook's kernel or a script with code 4 on Ctrl-C (tests/system/test_interrupt.py).
    from autotune.gpu import compiler

    tune(tmp_path, 1000)

    def here(*args, **kwargs):
        raise AssertionError("NVRTC ran in the caller's process")

    monkeypatch.setattr(compiler, "compile_program", here)
    assert lookup(tmp_path, 1000).cubin.startswith(ELF_MAGIC)


def test_no_stored_study_is_one_line_naming_it(tmp_path):
    with pytest.raises(NoTunedKernel, match="no results database"):
        lookup(tmp_path, 1000)
    tune(tmp_path, 1000)
    with pytest.raises(NoTunedKernel) as err:
        lookup(tmp_path, 5000)
    message = str(err.value)
    assert "\n" not in message and "'scale X=5000,Y=1,Z=1,args=" in message
    assert "tune_kernel" in message
    # Another launch (a grid divisor) is another study.
    with pytest.raises(NoTunedKernel):
        lookup(tmp_path, 1000, grid_div_x=["block_size_x", "ITEMS"])


def test_several_devices_need_a_name(tmp_path):
    tune(tmp_path, 1000)
    tune(tmp_path, 1000, name="Other GPU")
    with pytest.raises(NoTunedKernel, match="Other GPU, Synthetic GPU"):
        lookup(tmp_path, 1000)
    assert lookup(tmp_path, 1000, device_name="Other GPU").device == "Other GPU"


def test_a_custom_launch_is_stored_and_exported(tmp_path):
    extra = dict(grid_div_x=["block_size_x", "ITEMS"], smem_args={"size": "block_size_x * 4"})
    tune(tmp_path, 1000, **extra)
    kernel = lookup(tmp_path, 1000, **extra)
    assert kernel.grid == (4, 1, 1) and kernel.smem_bytes == 512  # ceil(1000 / 256), 128 * 4
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["export", "--format", "kernel", "--output", str(out), "--storage", str(tmp_path / "r.db")],
    )
    assert result.exit_code == 0, result.output
    header = (out / "scale.h").read_text()
    assert "#define SCALE_GRID_X 4\n" in header and "#define SCALE_SMEM_BYTES 512\n" in header


def test_export_header_and_json_per_size_and_device(tmp_path):
    for n in BEST:
        tune(tmp_path, n)
    tune(tmp_path, 1000, name="Other GPU")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["export", "--format", "kernel", "--output", str(out), "--storage", str(tmp_path / "r.db")],
    )
    assert result.exit_code == 0, result.output
    header = (out / "scale.h").read_text()
    block = header.split(" defined(TARGET_Synthetic_GPU) && defined(PROBLEM_SIZE_1000)\n")[1]
    block = block.split("#elif")[0]
    for line in (
        "#define block_size_x 128",
        "#define ITEMS 2",
        "#define grid_size_x 8",
        "#define SCALE_GRID_X 8",
        "#define SCALE_BLOCK_X 128",
        "#define SCALE_SMEM_BYTES 0",
    ):
        assert line + "\n" in block
    assert "kernel_tuner 1" not in header  # Kernel Tuner's tuning marker stays its own
    assert "defined(TARGET_Synthetic_GPU) && defined(PROBLEM_SIZE_5000)" in header
    assert "defined(TARGET_Other_GPU) && defined(PROBLEM_SIZE_1000)" in header
    assert "#else /* default" in header
    doc = json.loads((out / "scale.json").read_text())
    assert doc["version_number"] == "1.0" and doc["kernel_name"] == "scale"
    assert doc["objective"] == "time" and doc["objective_higher_is_better"] is False
    assert set(doc["tunable_parameters"]) == {"block_size_x", "ITEMS"}
    first = [d for d in doc["data"] if d["device_name"] == "Synthetic_GPU"]
    assert {d["problem_size"] for d in first} == {"1000", "5000"}
    best = {(b["device"], b["problem_size"]): b for b in doc["autotune"]["best"]}
    chosen = best[("Synthetic GPU", "1000")]
    assert chosen["config"] == BEST[1000] and chosen["grid"] == [8, 1, 1]
    assert chosen["block"] == [128, 1, 1] and chosen["smem_bytes"] == 0
    # Only the named kernels and devices.
    only = tmp_path / "only"
    args = [
        "export",
        "--format",
        "kernel",
        "--output",
        str(only),
        "--storage",
        str(tmp_path / "r.db"),
    ]
    result = CliRunner().invoke(main, [*args, "--device", "Other GPU", "--family", "scale"])
    assert result.exit_code == 0, result.output
    assert "TARGET_Synthetic_GPU" not in (only / "scale.h").read_text()
    result = CliRunner().invoke(main, [*args, "--family", "nothing_here"])
    assert result.exit_code == 1 and "nothing_here" in result.output


def test_the_header_compiles_the_kernel_per_target(tmp_path, compiler):
    for n in BEST:
        tune(tmp_path, n)
    out = tmp_path / "out"
    args = [
        "export",
        "--format",
        "kernel",
        "--output",
        str(out),
        "--storage",
        str(tmp_path / "r.db"),
    ]
    assert CliRunner().invoke(main, args).exit_code == 0
    source = out / "scale_tuned.cu"
    source.write_text('#include "scale.h"\nextern "C" {\n' + SOURCE + "}\n")
    for chosen in (
        (("TARGET_Synthetic_GPU", 1), ("PROBLEM_SIZE_5000", 1)),
        (("TARGET_Synthetic_GPU", 1),),  # the device's best over its sizes
        (),  # the default
    ):
        compiled = compiler.compile_source(source, chosen)
        assert compiled.cubin.startswith(ELF_MAGIC) and "scale" in compiled.resources
    # Kernel Tuner tunes with the header included: its defines win, the header's stay out.
    tuning = (("kernel_tuner", 1), ("block_size_x", 64), ("ITEMS", 1))
    assert compiler.compile_source(source, tuning).cubin.startswith(ELF_MAGIC)
