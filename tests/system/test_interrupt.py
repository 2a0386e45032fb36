"""SIGTERM ends a run the way Ctrl-C does: studies released, the run's end recorded, exit 143."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.gpu.interrupt import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    exit_code,
    terminate_as_interrupt,
)
from autotune.gpu.nvrtc_library import CompilerUnavailable, nvrtc_version

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess:
    """`code` run by a fresh Python from the checkout, its output captured."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_sigterm_inside_the_block_is_a_keyboard_interrupt_and_the_old_handler_returns() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt() as received:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this at once
    assert received == [signal.SIGTERM]
    assert exit_code(received) == EXIT_TERMINATED
    assert exit_code([]) == EXIT_INTERRUPTED
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_inside_signals_end_at_once_ends_the_process_with_the_shells_code() -> None:
    # The commands' start-up imports run in this block: a KeyboardInterrupt inside an extension
    # module's import left pandas or matplotlib half-initialised (exit -2, -6, SystemError).
    code = (
        "import os, signal, time\n"
        "from autotune.gpu.interrupt import signals_end_at_once\n"
        "before = signal.getsignal(signal.SIGINT)\n"
        "with signals_end_at_once():\n"
        "    pass\n"
        "assert signal.getsignal(signal.SIGINT) is before\n"
        "with signals_end_at_once():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "print('not reached')\n"
    )
    done = _python(code)
    assert (done.returncode, done.stdout, done.stderr) == (EXIT_TERMINATED, "", "")


def test_a_sigterm_that_escapes_a_commands_own_handling_still_exits_143() -> None:
    # A run's tuning had ended and the SIGTERM came inside its terminate_as_interrupt block,
    # where nothing caught the KeyboardInterrupt: click printed "Aborted!" and exited 1 (a CI
    # run of stop 41 met it). The process's exit code follows the signal, whoever took it.
    code = (
        "import os, signal, time, click\n"
        "import autotune.cli.app as app\n"
        "from autotune.gpu.interrupt import terminate_as_interrupt\n"
        "@click.command()\n"
        "def command():\n"
        "    with terminate_as_interrupt():\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(5)\n"
        "app.main = command\n"
        "app.entry()\n"
    )
    done = _python(code)
    assert done.returncode == EXIT_TERMINATED, done.stderr
    assert "Traceback" not in done.stderr


def test_a_sigterm_during_an_import_interrupts_once_the_import_has_ended(tmp_path: Path) -> None:
    # A KeyboardInterrupt inside `import cupy` left it half-initialised and the process then
    # exited -2 rather than 143 (CI, stop 48). The module below takes 0.5 s to import.
    (tmp_path / "slow_module.py").write_text(
        "import time\nfor _ in range(50):\n    time.sleep(0.01)\nCOMPLETE = True\n"
    )
    code = (
        "import os, signal, sys, threading, time\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from autotune.gpu.interrupt import terminate_as_interrupt\n"
        "with terminate_as_interrupt():\n"
        "    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
        "    try:\n"
        "        import slow_module\n"
        "        time.sleep(5)\n"
        "        print('not interrupted')\n"
        "    except KeyboardInterrupt:\n"
        "        module = sys.modules.get('slow_module')\n"
        "        print('interrupted after the import:', getattr(module, 'COMPLETE', False))\n"
    )
    done = _python(code)
    assert done.stdout == "interrupted after the import: True\n", done.stderr


@pytest.mark.parametrize(
    "compiler",
    [
        "compile_in_children()\ncompiler = Compiler()",  # the command line's, a tuning worker's
        "compiler = Compiler(in_children=True)",  # the runtime's, tune_kernel's, tuned_kernel's
    ],
)
def test_a_stop_signal_during_a_compile_reaches_the_processs_own_handler(
    tmp_path, nvrtc, compiler
) -> None:
    # NVRTC takes SIGINT and SIGTERM for the length of a compile and ends the process with
    # code 4 (this script with a plain Compiler(): exit 4 in 0.3 s). The command line, the
    # tuning workers and the library's calls in a user's process compile in child processes.
    source = tmp_path / "half.cu"
    source.write_text(
        "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
        'extern "C" __global__ void k(__half *x) { x[0] = __hadd(x[0], __float2half(1.0f)); }\n'
    )
    code = (
        "import os, signal, threading\n"
        "from autotune.gpu.compiler import Compiler, compile_in_children\n"
        f"{compiler}\n"
        "taken = []\n"
        "signal.signal(signal.SIGTERM, lambda signum, frame: taken.append(signum))\n"
        "done = threading.Event()\n"
        "def pester():\n"
        "    while not done.wait(0.01):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "threading.Thread(target=pester, daemon=True).start()\n"
        f"compiled = compiler.compile_source({str(source)!r}, ())\n"
        "done.set()\n"
        "print(compiled.cubin[:4] == b'\\x7fELF', len(taken) > 0)\n"
    )
    done = _python(code)
    assert (done.returncode, done.stdout) == (0, "True True\n"), done.stderr


@pytest.mark.slow  # a campaign in a subprocess
def test_a_terminated_campaign_releases_its_studies_and_records_its_end(tmp_path: Path) -> None:
    try:
        nvrtc_version()
    except CompilerUnavailable as err:
        pytest.skip(str(err))
    db, log = tmp_path / "t.db", tmp_path / "t.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.campaign_worker", str(db), str(tmp_path), str(log)]
        + ["--two-studies"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not (log.exists() and log.read_text().count("\n") >= 3):  # mid-campaign
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the campaign never started evaluating"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == EXIT_TERMINATED, proc.stderr.read().decode()
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)
        assert con.execute("SELECT COUNT(*) FROM runs WHERE finished_at IS NULL").fetchone() == (0,)
        assert con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] >= 2
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# ---------------------------------------------------------------------------------------------
# The command line: a signal at any moment ends it within 10 s, a stuck child included.

SIGNALS = 8  # random moments, from start-up through the baselines, compiling and tuning
CLI = [sys.executable, "-m", "tests.synthetic_cli"]
RUN = ["run", "--family", "direct_naive", "--shape", "N=29,K=3,C=2,F=3", "--budget", "40"]


def _cli(tmp_path: Path, *extra: str) -> subprocess.Popen:
    args = [*RUN, "--jobs", "2", "--storage", str(tmp_path / "r.db")]
    return subprocess.Popen(
        [*CLI, *extra, *args, "--cache-dir", str(tmp_path / "cubins")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a group of its own, as a terminal's foreground job
    )


def _signal(proc: subprocess.Popen, signum: int) -> None:
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches every process of the group
    else:
        proc.send_signal(signal.SIGTERM)  # kill, timeout: the main process only


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # killed, waiting for init to reap it


@pytest.fixture(scope="module")
def nvrtc() -> None:
    try:
        nvrtc_version()
    except CompilerUnavailable as err:
        pytest.skip(str(err))


@pytest.mark.parametrize("moment", range(SIGNALS))
def test_a_signal_at_any_moment_ends_the_command_within_10_s(tmp_path, nvrtc, moment) -> None:
    rng = random.Random(moment)
    signum = (signal.SIGINT, signal.SIGTERM)[moment % 2]
    proc = _cli(tmp_path)
    time.sleep(rng.uniform(0.5, 8.0))
    sent = time.monotonic()
    _signal(proc, signum)
    code = proc.wait(timeout=60)
    took = time.monotonic() - sent
    assert took < 10, f"exited {took:.1f} s after the signal"
    stderr = proc.stderr.read().decode()
    assert "Traceback" not in stderr, stderr
    # 0: the run had ended before the signal came; -signum: it came as the interpreter was
    # finishing, when Python has put the default handlers back (a shell shows 128 + signum).
    assert code in (128 + signum, -signum, 0), stderr


def test_a_child_that_holds_the_exit_is_ended_by_the_watchdog(tmp_path, nvrtc) -> None:
    pidfile = tmp_path / "child.pid"
    proc = _cli(tmp_path, "--hold-child", str(pidfile))
    deadline = time.monotonic() + 60
    while not (tmp_path / "r.db").exists():  # tuning has started
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1.0)
    sent = time.monotonic()
    _signal(proc, signal.SIGINT)
    try:
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:  # the watchdog failed: leave nothing behind
            os.killpg(proc.pid, signal.SIGKILL)
    assert time.monotonic() - sent < 10
    assert code == 130
    assert "still not stopped after 8 s; ending now" in proc.stderr.read().decode()
    assert _gone(int(pidfile.read_text()))
