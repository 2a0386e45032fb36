"""User code never crosses a process boundary: Kernel Tuner scripts as people write them (no main
guard, `python -c`, `python -`, a launcher's runpy, a verify defined inside a function, a
notebook) run tune_kernel with the real GPU worker process and compile processes, a synthetic
session standing in for the GPU inside the worker (autotune/gpu/synthetic.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The script's top level is what multiprocessing's spawn would run again in every child: the
# marker file counts how often it ran. The verify functions append to a list of this process:
# after tune_kernel, its length says they were called here (a call in a worker is lost).
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from autotune import tune_kernel
    from autotune.gpu.evaluator import GpuEvaluator

    with open(MARKER, "a") as fh:
        fh.write("ran\\n")

    SOURCE = '''
    __global__ void scale(float* y, const float* x, float a, int n) {
        int i = blockIdx.x * block_size_x + threadIdx.x;
        if (i < n) y[i] = a * x[i];
    }
    '''
    n = 1000
    x = np.linspace(0, 1, n, dtype=np.float32)
    args = [np.zeros_like(x), x, np.float32(2), np.int32(n)]
    calls = []
    # %%

    def tune(verify):
        global worker_pid
        worker = GpuEvaluator(session=SESSION)
        worker_pid = worker.worker_pid
        try:
            results, env = tune_kernel(
                "scale", SOURCE, n, args, {"block_size_x": [32, 64, 128, 256]},
                answer=[2 * x, None, None, None], verify=verify, evaluator=worker,
                storage=STORAGE, compiler_cache=None, quiet=True,
            )
        finally:
            worker.close()
        return worker, results

    def main():
        # Defined inside a function, as in Kernel Tuner's examples/cuda/reduction.py: it cannot
        # be pickled, and needs not be.
        def verify(answer, result, atol=None):
            calls.append((len(result), float(result[2]), atol))
            return result[0].shape == answer[0].shape and len(calls) != 2
        return tune(verify)
    # %%

    worker, results = main()
    print(json.dumps({
        "verify_calls": calls,
        "times": [r["time"] if isinstance(r["time"], float) else str(r["time"]) for r in results],
        "worker_pid": worker_pid,
        "pid": __import__("os").getpid(),
    }))
    """
)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


SYNTHETIC = "autotune.gpu.synthetic:SyntheticSession"


def script(tmp_path: Path, session: str = SYNTHETIC) -> str:
    """The script's text, run with the GPU worker opening `session` (the real GPU's, or the
    synthetic one)."""
    head = f"MARKER = {str(tmp_path / 'marker')!r}\nSTORAGE = {str(tmp_path / 'r.db')!r}\n"
    return head + f"SESSION = {session!r}\n" + SCRIPT


def check_report(tmp_path: Path, proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bootstrapping phase" not in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    # The script's top level ran once: no worker re-ran the caller's main module.
    assert (tmp_path / "marker").read_text() == "ran\n"
    assert report["worker_pid"] != report["pid"]  # the GPU worker is a process of its own
    # verify was called here, once per configuration, with the worker's outputs and atol.
    assert len(report["verify_calls"]) == 4
    assert all(c[0] == 4 and c[1] == 2.0 and c[2] == 1e-6 for c in report["verify_calls"])
    # Its second call said False: that configuration failed verification, the others timed.
    assert sorted(isinstance(t, float) for t in report["times"]) == [False, True, True, True]
    assert "VerificationFailedConfig" in report["times"]
    return report


def run_python(args: list[str], tmp_path: Path, stdin: str | None = None):
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=_env(),
    )


def test_a_script_without_a_main_guard(tmp_path) -> None:
    path = tmp_path / "tune_scale.py"
    path.write_text(script(tmp_path))
    check_report(tmp_path, run_python([str(path)], tmp_path))


def test_python_dash_c(tmp_path) -> None:
    check_report(tmp_path, run_python(["-c", script(tmp_path)], tmp_path))


def test_a_script_on_standard_input(tmp_path) -> None:
    check_report(tmp_path, run_python(["-"], tmp_path, stdin=script(tmp_path)))


def test_a_script_run_by_a_launcher_through_runpy(tmp_path) -> None:
    # As a launcher or a test harness runs a script: its module is not importable by name.
    path = tmp_path / "launched" / "tune_scale.py"
    path.parent.mkdir()
    path.write_text(script(tmp_path))
    launcher = f"import runpy; runpy.run_path({str(path)!r}, run_name='__main__')"
    check_report(tmp_path, run_python(["-c", launcher], tmp_path))


def run_notebook(tmp_path: Path, session: str = SYNTHETIC) -> subprocess.CompletedProcess:
    """The script as a notebook's three cells, executed by a Jupyter kernel (nbclient), its last
    cell's output as a finished process's (skipped where nbclient or ipykernel is missing)."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel (the notebook's Python kernel) is missing")
    code = script(tmp_path, session)
    # Cells as a notebook's author writes them: the verify lives in a cell (module __main__).
    cells = code.split("# %%\n")
    assert len(cells) == 3
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    os.environ["PYTHONPATH"] = _env()["PYTHONPATH"]  # the kernel is a child of this process
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()
    outputs = notebook.cells[-1].outputs
    text = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    return subprocess.CompletedProcess([], 0, stdout=text, stderr=stderr)


def test_a_notebook(tmp_path) -> None:
    check_report(tmp_path, run_notebook(tmp_path))
