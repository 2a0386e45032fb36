"""tune_kernel on the GPU: both example scripts tuned and checked against their answers, and the
check shown to fail where it must (a wrong answer, a verify function that says no)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from autotune import tune_kernel

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VECTOR_ADD = """
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
BLOCK_SUMS = """
__global__ void block_sums(float *sums, const float *x, int n) {
    extern __shared__ float part[];
    int i = blockIdx.x * block_size_x + threadIdx.x;
    part[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int half = block_size_x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = part[0];
}
"""


def example(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / name / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _scratch_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # The examples name no storage: they store into the default database, here under tmp_path.
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "autotune.db"))


def test_vector_add_example_every_configuration_matches_the_answer():
    results, env = example("vector_add").tune()
    assert len(results) == 15
    assert all(r["status"] == "OK" and r["time"] > 0 for r in results), results
    assert env["device_name"]
    assert env["best_config"]["time"] == min(r["time"] for r in results)
    assert Path("autotune.db").is_file()


def test_convolution_example_matches_the_answer():
    results, env = example("convolution").tune("random_sample", {"max_fevals": 12})
    assert len(results) == 12
    for r in results:
        rows = r["block_size_y"] * r["tile_size_y"] + 16
        cols = r["block_size_x"] * r["tile_size_x"] + 16
        fits = rows * cols * 4 <= 48 * 1024  # static shared memory of the staged tile
        # Checked, then timed (SLOW: stopped early, over 4x the best so far), or refused before
        # it runs (too much shared memory to compile, too many registers for its block).
        assert r["status"] in (("OK", "SLOW") if fits else ("COMPILE_ERROR",)) + ("RESOURCES",), r
    assert any(r["status"] == "OK" for r in results)


def vector_add(answer, **extra):
    n = 100_000
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    return tune_kernel(
        "vector_add",
        VECTOR_ADD,
        n,
        [np.zeros_like(a), a, b, np.int32(n)],
        {"block_size_x": [128, 256]},
        answer=[answer(a, b), None, None, None],
        quiet=True,
        **extra,
    )


def test_a_wrong_answer_fails_every_configuration():
    results, env = vector_add(lambda a, b: a - b)
    assert [r["status"] for r in results] == ["WRONG_RESULT"] * 2
    assert "best_config" not in env


def outputs_match(answer, result_host, atol):
    return bool(np.allclose(result_host[0], answer[0], atol=atol))


def never(answer, result_host):
    return False


def test_a_verify_function_decides():
    results, _ = vector_add(lambda a, b: a + b, verify=outputs_match)
    assert [r["status"] for r in results] == ["OK"] * 2
    # Another database: the same study in the first would resume, not run again.
    results, _ = vector_add(lambda a, b: a + b, verify=never, storage="other.db")
    assert [r["status"] for r in results] == ["WRONG_RESULT"] * 2


def test_dynamic_shared_memory_from_smem_args():
    n = 1 << 16
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    sums = np.zeros(n // 64, np.float32)
    results, _ = tune_kernel(
        "block_sums",
        BLOCK_SUMS,
        n,
        [sums, x, np.int32(n)],
        {"block_size_x": [64, 128, 256]},
        smem_args={"size": "block_size_x * 4"},
        answer=[None, None, None],
        verify=block_sums_ok,
        quiet=True,
    )
    assert [r["status"] for r in results] == ["OK"] * 3


def block_sums_ok(answer, result_host, atol=1e-6):
    sums, x = result_host[0], result_host[1]
    for width in (64, 128, 256):  # the config is not passed to verify: one of them must hold
        blocks = x.size // width
        if np.allclose(sums[:blocks], x.reshape(blocks, width).sum(axis=1), atol=1e-3):
            return True
    return False


@pytest.mark.parametrize("how", ["script", "python -c"])
def test_a_script_without_a_main_guard_runs_on_the_gpu(tmp_path, how):
    # The CPU suite's script (tests/nvrtc/test_user_code.py) with the real GPU worker: no
    # re-import of the script, the nested verify called in the script's own process.
    from tests.nvrtc.test_user_code import check_report, run_python, script

    text = script(tmp_path, session="autotune.gpu.session:GpuSession")
    if how == "script":
        path = tmp_path / "tune_scale.py"
        path.write_text(text)
        proc = run_python([str(path)], tmp_path)
    else:
        proc = run_python(["-c", text], tmp_path)
    check_report(tmp_path, proc)


def test_a_notebook_runs_on_the_gpu(tmp_path):
    # The CPU suite's notebook (tests/nvrtc/test_user_code.py) with the real GPU worker: its
    # verify, defined in a cell, called in the notebook's kernel, never pickled.
    from tests.nvrtc.test_user_code import check_report, run_notebook

    check_report(tmp_path, run_notebook(tmp_path, session="autotune.gpu.session:GpuSession"))


def test_in_this_process_and_isolated_in_a_worker_both_check_and_time():
    here, _ = vector_add(lambda a, b: a + b)
    isolated, _ = vector_add(lambda a, b: a + b, isolate=True, storage="isolated.db")
    for results in (here, isolated):
        assert [r["status"] for r in results] == ["OK"] * 2
        assert all(r["time"] > 0 for r in results)


# A user's script: one tunable value (BAD, a define as every tunable is) makes the kernel write
# to an illegal address, which loses the CUDA context of the process it runs in.
POISON = """
import json, warnings
import numpy as np
from autotune import tune_kernel
SOURCE = '''
__global__ void poke(float *y, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    float *out = BAD ? (float *)0x40 : y;
    if (i < n) out[i] = 1.0f;
}
'''
n = 4096
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    results, env = tune_kernel(
        "poke", SOURCE, n, [np.zeros(n, np.float32), np.int32(n)],
        {"block_size_x": [64, 128, 256], "BAD": [0, 1]}, answer=[np.ones(n, np.float32), None],
        quiet=True, storage="poison.db",
    )
print(json.dumps({
    "statuses": [[r["BAD"], r["status"]] for r in results],
    "warned": any("restart Python" in str(w.message) for w in said),
}))
"""


def test_a_kernel_that_loses_this_processs_context_is_a_crash_and_the_rest_run_on(tmp_path):
    """In a process of its own, as a user's script runs: each configuration that writes to an
    illegal address is a crash, the first of them said once, and every configuration after it
    is checked and timed in a worker process."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", POISON], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    statuses = report["statuses"]
    assert len(statuses) == 6
    assert {s for bad, s in statuses if bad == 1} == {"CRASH"}, statuses
    assert {s for bad, s in statuses if bad == 0} == {"OK"}, statuses
    assert report["warned"]
