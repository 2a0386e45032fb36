"""The hostile-input suite of issue 38 over the command line: for every option of the main
commands a bad value (hypothesis draws it) is refused with a non-zero exit, every line on stderr
an `autotune: ` line, the last one saying what is wrong, no traceback, no password shown, and
the results database (made by a synthetic run) byte-identical. In-process (CliRunner); no GPU."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotune.gpu.evaluator
from autotune.cli.app import main
from tests.conftest import SyntheticEvaluator

SHAPE = "N=9,K=3,C=1,F=2"
SECRET = "s3cr3tpw"

# Bad values by what an option takes. Each is wrong for every option of its kind.
ESCAPES = st.sampled_from(["\x1b[2J", "\x1b]0;t\x07", "\u202e", "\x00", "\r", "\n"])
JUNK = st.one_of(
    st.text(min_size=1, max_size=12).map(lambda t: "zz" + t),  # no valid name starts so
    st.builds(lambda a, e: f"zz{a}{e}", st.text(max_size=4), ESCAPES),
    st.just("zz" * 3000),
)
NUMBERS = st.sampled_from(
    ["nan", "inf", "-inf", "1e300", "-1", "1_0", "\u0661", "\uff11", "", " ", "0x10", "abc", "2**8"]
)
COUNTS = NUMBERS | st.sampled_from(["0", "1.5", str(2**64)])
SHAPES = st.one_of(
    JUNK,
    st.sampled_from(["N=9", "N=0,K=3,C=1,F=2", "N=9,K=3,C=1,F=2,Q=1", "N=1_0,K=3,C=1,F=2"]),
    st.builds(lambda v: f"N={v},K=3,C=1,F=2", NUMBERS),
)
STORAGES = st.sampled_from(
    [
        f"postgresql://u:{SECRET}@[::1:1/db",
        f"postgresql://u:{SECRET}@127.0.0.1:notaport/db",
        f"postgresql://tuner@127.0.0.1:1/x?password={SECRET}",
        "nosuchdriver://x/y",
        "sqlite:////proc/no-such-dir/r.db",
        "{fifo}",
        "{tmp}",
        "{text}",
        "/dev/null",
    ]
)
IN_FILES = st.sampled_from(["{fifo}", "{tmp}", "{tmp}/missing", "/dev/null", "{text}"])
IN_DIRS = st.sampled_from(["{text}", "{tmp}/missing", "{badkernels}"])
OUT_FILES = st.sampled_from(["{text}/below", "/proc/nope/x", "{tmp}", "{fifo}"])
OUT_DIRS = st.sampled_from(["{text}/below", "/proc/nope/x", "{text}"])


def choice_junk(*valid: str):
    return JUNK.filter(lambda t: t.strip().lower() not in valid)


# (command, its other options, the option, bad values). The other options make a valid command
# (against the synthetic run's database), so the drawn value alone is what is wrong.
RUN = ["run", "--family", "direct_naive", "--shape", SHAPE, "--budget", "1", "--no-baseline"]
EXPORT = ["export", "--output", "{tmp}/e"]
RECORDING = ["export-recording", "--output", "{tmp}/r.jsonl.gz"]
BASELINE = ["baseline", "--shape", SHAPE]
TUNE_MODEL = ["tune-model", "--model", "resnet50"]
SCALING = ["bench", "scaling", "--gpus", "0,1"]
READ = {"best": ["best"], "plot": ["plot"], "report": ["report"], "export": ["export"]}
CASES = [
    (RUN, "--campaign", choice_junk("quick", "full")),
    (RUN, "--family", JUNK),
    (RUN, "--kernels", IN_DIRS),
    (RUN, "--shapes", JUNK),
    (RUN, "--shape", SHAPES),
    (RUN, "--shape-file", IN_FILES),
    (RUN, "--dtype", choice_junk()),
    (RUN, "--layout", choice_junk()),
    (RUN, "--strategy", JUNK),
    (RUN, "--budget", COUNTS),
    (RUN, "--time-limit", NUMBERS),
    (RUN, "--seed", NUMBERS),
    (RUN, "--gpu", NUMBERS),
    (RUN, "--gpus", st.sampled_from(["0,x", "-1", "1_0", ",", "0,0"]) | JUNK),
    # --cache-dir that cannot be written is no error: the run tunes without a cache, saying so.
    (RUN, "--jobs", COUNTS | st.just("100000000")),
    (RUN, "--replay", IN_FILES),
    (RUN, "--subspace", IN_FILES),
    (RUN, "--storage", STORAGES),
    (["best"], "--format", choice_junk("markdown", "csv")),
    (["best"], "--family", JUNK),
    (["best"], "--problem-kind", choice_junk()),
    (["best"], "--dtype", choice_junk()),
    (["best"], "--output", OUT_FILES),
    (["best"], "--columns", JUNK),
    (["best"], "--kernels", IN_DIRS),
    (["best"], "--protocol", NUMBERS | st.just("3")),
    (["best"], "--storage", STORAGES),
    (["plot"], "--family", JUNK),
    (["plot"], "--kind", choice_junk()),
    (["plot"], "--output", OUT_FILES),
    (["plot"], "--problem-kind", choice_junk()),
    (["plot"], "--dtype", choice_junk()),
    (["plot"], "--protocol", NUMBERS),
    (["plot"], "--storage", STORAGES),
    (["report"], "--output-dir", OUT_DIRS),
    (["report"], "--protocol", NUMBERS),
    (["report"], "--storage", STORAGES),
    (["status"], "--minutes", NUMBERS | st.just("0")),
    (["status"], "--storage", STORAGES),
    (EXPORT, "--output", OUT_DIRS),
    (EXPORT, "--format", choice_junk()),
    (EXPORT, "--family", JUNK),
    (EXPORT, "--shape", SHAPES),
    (EXPORT, "--shape-file", IN_FILES),
    (EXPORT, "--shapes", JUNK),
    (EXPORT, "--protocol", NUMBERS),
    (EXPORT, "--storage", STORAGES),
    (["merge", "{db}"], "--storage", STORAGES),
    (["merge"], None, IN_FILES | JUNK),  # the SOURCE argument
    (["forget", "--family", "direct_naive", "--yes"], "--family", JUNK),
    (["forget", "--family", "direct_naive", "--yes"], "--shape", SHAPES),
    (["forget", "--family", "direct_naive", "--yes"], "--kernels", IN_DIRS),
    (["forget", "--family", "direct_naive", "--yes"], "--storage", STORAGES),
    (["import-kt-cache", "--output", "{tmp}/o"], None, IN_FILES),
    (["import-kt-cache", "{kt}"], "--output", OUT_DIRS),
    (["space", "direct_naive", "--shape", SHAPE], "--shape", SHAPES),
    (["space", "direct_naive", "--shape", SHAPE], "--arch", choice_junk()),
    (["space", "direct_naive", "--shape", SHAPE], "--samples", NUMBERS),
    (["space", "direct_naive", "--shape", SHAPE], "--dtype", choice_junk()),
    (["space", "direct_naive", "--shape", SHAPE], "--layout", choice_junk()),
    (["space", "direct_naive", "--shape", SHAPE], "--subspace", IN_FILES),
    (["space", "direct_naive", "--shape", SHAPE], "--kernels", IN_DIRS),
    (["space", "--shape", SHAPE], None, JUNK),  # FAMILY
    (["bench", "search"], "--recordings", IN_FILES),
    (["bench", "search"], "--strategies", JUNK),
    (["bench", "search"], "--seeds", COUNTS),
    (["bench", "search"], "--budgets", COUNTS | JUNK),
    (["bench", "search"], "--jobs", COUNTS),
    (["bench", "search"], "--output-dir", OUT_DIRS),
    (["bench", "search"], "--runs", IN_FILES.filter(lambda f: "missing" not in f)),
    (["bench", "search"], "--few-seeds", JUNK | NUMBERS.map(lambda n: f"gp={n}")),
    (["bench", "throughput", "--skip-kernel-tuner"], "--evals-5x5", COUNTS),
    (["bench", "throughput", "--skip-kernel-tuner"], "--evals-17x17", COUNTS),
    (["bench", "throughput", "--skip-kernel-tuner"], "--seed", NUMBERS),
    (["bench", "throughput", "--skip-kernel-tuner"], "--jobs", COUNTS),
    (["bench", "throughput", "--skip-kernel-tuner"], "--gpu", NUMBERS),
    (["bench", "throughput", "--skip-kernel-tuner"], "--output-dir", OUT_DIRS),
    (["bench", "throughput", "--skip-kernel-tuner"], "--filter-size", choice_junk("5", "17")),
    (["bench", "dispatch"], "--shape-set", JUNK),
    (["bench", "dispatch"], "--calls", COUNTS),
    (["bench", "dispatch"], "--repeats", COUNTS),
    (["bench", "dispatch"], "--launcher", choice_junk("cupy", "driver")),
    (["bench", "dispatch"], "--name", JUNK),
    (["bench", "dispatch"], "--output", OUT_DIRS),
    (["bench", "dispatch"], "--storage", STORAGES),
    (["bench", "dispatch"], "--dtype", choice_junk()),
    (["bench", "dispatch"], "--layout", choice_junk()),
    (["bench", "search"], "--name", JUNK),
    (["bench", "throughput", "--skip-kernel-tuner"], "--storage", STORAGES),
    (["bench", "model"], "--model", choice_junk("resnet50", "vgg16")),
    (["bench", "model"], "--batch", COUNTS),
    (["bench", "model"], "--precision", choice_junk("fp32", "tf32", "bf16")),
    (["bench", "model"], "--warmup", COUNTS),
    (["bench", "model"], "--repeats", COUNTS),
    (["bench", "model"], "--launcher", choice_junk("cupy", "driver")),
    (["bench", "model"], "--storage", STORAGES),
    (["bench", "model"], "--output", OUT_DIRS),
    (["bench", "plan-choice"], "--storage", STORAGES),
    (["bench", "plan-choice"], "--device", JUNK),
    (["bench", "plan-choice"], "--preview-set", JUNK),
    (["bench", "plan-choice"], "--output", OUT_DIRS),
    (["bench", "kt-examples"], "--examples", IN_DIRS),
    (["bench", "kt-examples"], "--only", JUNK),
    (["bench", "kt-examples"], "--timeout", NUMBERS),
    (["bench", "kt-examples"], "--max-fevals", COUNTS),
    (["bench", "kt-examples", "--kernel-tuner"], "--kt-lang", choice_junk("cupy", "nvcuda")),
    (["bench", "kt-examples"], "--output", OUT_DIRS),
    (["bench", "scaling"], "--gpus", JUNK | st.sampled_from(["0", "0,0", "1_0,2"])),
    (SCALING, "--family", JUNK),
    (SCALING, "--shapes", JUNK),
    (SCALING, "--budget", COUNTS),
    (SCALING, "--strategy", choice_junk()),
    (SCALING, "--reuse", IN_FILES),
    (SCALING, "--output-dir", OUT_DIRS),
    (RUN, "--observe", JUNK),
    (BASELINE, "--observe", JUNK),
    (RUN, "--ray", JUNK),
    (["best"], "--device", JUNK),
    (["plot"], "--device", JUNK),
    (["plot"], "--kernels", IN_DIRS),
    (["report"], "--device", JUNK),
    (["families"], "--kernels", IN_DIRS),
    (EXPORT, "--dtype", choice_junk()),
    (EXPORT, "--layout", choice_junk()),
    (EXPORT, "--device", JUNK),
    (EXPORT, "--kernels", IN_DIRS),
    (RECORDING, "--family", JUNK),
    (RECORDING, "--shape", SHAPES),
    (RECORDING, "--dtype", choice_junk()),
    (RECORDING, "--layout", choice_junk()),
    (RECORDING, "--device", JUNK),
    (RECORDING, "--subspace", IN_FILES),
    (RECORDING, "--output", OUT_FILES),
    (RECORDING, "--protocol", NUMBERS | st.just("3")),
    (RECORDING, "--storage", STORAGES),
    (["data", "pack", "{tmp}/p.db.gz"], "--since", JUNK),
    (["data", "pack", "{tmp}/p.db.gz"], "--best-dir", OUT_DIRS),
    (["data", "pack", "{tmp}/p.db.gz"], "--kernels", IN_DIRS),
    (["data", "pack", "{tmp}/p.db.gz"], "--storage", STORAGES),
    (["data", "backfill", "--yes"], "--kernels", IN_DIRS),
    (["data", "backfill", "--yes"], "--storage", STORAGES),
    # The commands that start the GPU: every bad value is refused before it starts.
    (BASELINE, "--shapes", JUNK),
    (BASELINE, "--shape", SHAPES),
    (BASELINE, "--shape-file", IN_FILES),
    (BASELINE, "--dtype", choice_junk()),
    (BASELINE, "--layout", choice_junk()),
    (BASELINE, "--gpu", NUMBERS),
    (BASELINE, "--storage", STORAGES),
    (["remeasure"], "--family", JUNK),
    (["remeasure"], "--shapes", JUNK),
    (["remeasure"], "--shape", SHAPES),
    (["remeasure"], "--shape-file", IN_FILES),
    (["remeasure"], "--dtype", choice_junk()),
    (["remeasure"], "--observe", JUNK),
    (["remeasure"], "--layout", choice_junk()),
    (["remeasure"], "--top", COUNTS),
    (["remeasure"], "--time-limit", NUMBERS),
    (["remeasure"], "--gpu", NUMBERS),
    (["remeasure"], "--jobs", COUNTS),
    (["remeasure"], "--storage", STORAGES),
    (["device"], "--gpu", NUMBERS),
    (["device"], "--ceiling", choice_junk()),
    (["device"], "--storage", STORAGES),
    (["tune-model"], "--model", JUNK),
    (TUNE_MODEL, "--batch", COUNTS),
    (TUNE_MODEL, "--dtype", choice_junk()),
    (TUNE_MODEL, "--budget", COUNTS),
    (TUNE_MODEL, "--family", JUNK),
    (TUNE_MODEL, "--gpu", NUMBERS),
    (TUNE_MODEL, "--time-limit", NUMBERS),
    (TUNE_MODEL, "--storage", STORAGES),
]
# Options that take any value, or whose odd values are no error by design, and why.
ANY_VALUE = {
    (
        "run",
        "--cache-dir",
    ): "a cache that cannot be written is no error: the run compiles each time",
    ("remeasure", "--cache-dir"): "as run's",
    ("forget", "--device"): "a device with nothing stored: 'deleted 0 evaluations'",
    ("import-kt-cache", "--family"): "the name the user gives the recorded kernel",
    ("import-kt-cache", "--device"): "the name the user gives the file's device",
}
TAKES_STORAGE = {"run", "best", "plot", "report", "status", "export", "merge", "forget"}
TAKES_STORAGE |= {"baseline", "remeasure", "device", "tune-model", "export-recording", "data"}
STARTS_GPU = {"run", "baseline", "remeasure", "device", "tune-model"}


def _digest(path: Path) -> str:
    """The database's bytes, its write-ahead log's included (a write may sit there)."""
    wal = path.with_name(path.name + "-wal")
    return hashlib.sha256(
        path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    ).hexdigest()


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, str]:
    """A results database made by a synthetic run, and the files the bad values name."""
    import unittest.mock

    tmp = tmp_path_factory.mktemp("hostile")
    db = tmp / "results.db"
    synthetic = unittest.mock.patch.object(
        autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: SyntheticEvaluator(lambda d: 1.0)
    )
    with synthetic:
        args = ["run", "--family", "direct_naive", "--shape", SHAPE, "--budget", "2"]
        args += ["--no-baseline", "--jobs", "1", "--storage", str(db)]
        made = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp / "cubins")])
    assert made.exit_code == 0, made.output
    gc.collect()  # the run's engine, closed: nothing of it writes the file later
    with contextlib.closing(sqlite3.connect(db)) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.mkfifo(tmp / "fifo")  # reading it would block forever
    (tmp / "text").write_text("not what any option reads\n\x1b[31m")
    bad = tmp / "badkernels"
    bad.mkdir()
    (bad / "k.cu").write_text("")
    (bad / "k.toml").write_text("[family]\nkind = 'conv9d'\n")
    kt = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner"
    return {
        "db": str(db),
        "tmp": str(tmp),
        "fifo": str(tmp / "fifo"),
        "text": str(tmp / "text"),
        "badkernels": str(bad),
        "kt": str(kt / "pnpoly_RTX_2080_Ti.json.gz"),
    }


def _fill(text: str, places: dict[str, str]) -> str:
    for name, value in places.items():
        text = text.replace("{" + name + "}", value)
    return text


def _gpu_must_not_start(index=0):
    raise AssertionError("a bad input reached the GPU")


@settings(
    max_examples=1000,  # about 5 for each of the ~190 options: seconds, parse errors mostly
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.sampled_from(range(len(CASES))), data=st.data())
def test_a_bad_value_of_any_option_is_refused_in_one_line(places, monkeypatch, case, data):
    command, option, values = CASES[case]
    value = _fill(data.draw(values, label=f"{' '.join(command[:2])} {option}"), places)
    args = [_fill(a, places) for a in command]
    args += [option, value] if option else [value]
    name = command[0]
    storage = ["--storage", places["db"]] if name in TAKES_STORAGE and option != "--storage" else []
    if option == "--storage" and name in STARTS_GPU:  # may start the GPU before it opens storage
        gpu = lambda index=0: SyntheticEvaluator(lambda d: 1.0)  # noqa: E731
    else:
        gpu = _gpu_must_not_start
    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", gpu)
    monkeypatch.chdir(places["tmp"])  # bench's defaults (results/...) do not exist here
    monkeypatch.delenv("AUTOTUNE_KT_EXAMPLES", raising=False)  # no example is ever run
    before = _digest(Path(places["db"]))

    result = CliRunner().invoke(main, [*args, *storage])

    shown = (args, result.output)
    assert result.exit_code != 0, shown
    assert isinstance(result.exception, SystemExit), (shown, repr(result.exception))
    assert "Traceback" not in result.output, shown
    assert SECRET not in result.output, shown
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors and all(line.startswith("autotune: ") for line in errors), shown
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr, shown
    assert _digest(Path(places["db"])) == before, shown


def _command_of(args: list[str]) -> str:
    """'run', or 'bench search' for a group's command."""
    return " ".join(args[:2] if args[0] in ("bench", "data") else args[:1])


def test_every_option_that_takes_a_value_is_drawn_bad_values_for() -> None:
    # A new option joins the suite, or says here why any value of it is right.
    import click

    def options(command, ctx, path):
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                yield from options(sub, click.Context(sub, parent=ctx), [*path, name])
            return
        for param in command.params:
            if isinstance(param, click.Option) and not param.is_flag and param.name != "help":
                yield " ".join(path), param.opts[0]

    covered = {(_command_of(command), option) for command, option, _ in CASES}
    covered |= {(command.split()[0], option) for command, option in ANY_VALUE}
    every = set(options(main, click.Context(main), []))
    assert every - covered == set()
    assert len(every) > 150  # the walk found the commands of the groups too
