"""Issue 38's bad inputs, each refused in one line with a non-zero exit and no traceback; and a
property suite that draws bad values for the options and checks the same, the database unchanged."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune.cli.app import main

SHAPE = ["--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2"]


def _refused(args: list[str], said: str | None = None) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0, (args, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args,
        repr(result.exception),
    )
    assert "Traceback" not in result.output
    error = [line for line in result.output.splitlines() if "rror" in line or "autotune:" in line]
    assert len(error) == 1, result.output  # one line says what is wrong
    if said is not None:
        assert said in error[0], result.output
    return error[0]


@pytest.mark.parametrize("minutes", ["nan", "inf", "1e300", "-1", "0"])
def test_status_minutes_must_be_a_finite_window(minutes, tmp_path) -> None:
    _refused(["status", "--minutes", minutes, "--storage", str(tmp_path / "x.db")], "--minutes")


@pytest.mark.parametrize(
    "args",
    [
        ["import-kt-cache", "{fifo}", "--output", "{tmp}/out"],
        ["run", "--replay", "{fifo}"],
        ["run", *SHAPE, "--shape-file", "{fifo}"],
        ["run", *SHAPE, "--subspace", "{fifo}"],
        ["import-kt-cache", "{tmp}", "--output", "{tmp}/out"],
    ],
)
def test_a_file_argument_that_is_no_regular_file_is_refused_at_once(args, tmp_path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would block forever
    args = [a.replace("{fifo}", str(fifo)).replace("{tmp}", str(tmp_path)) for a in args]
    _refused(args)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--exhaustive", "--budget", "3"], "--exhaustive"),
        (["--seed", "-1"], "--seed"),
        (["--seed", str(2**64 + 1)], "--seed"),
        (["--jobs", "100000000"], "--jobs"),
    ],
)
def test_run_options_out_of_range(extra, said, tmp_path) -> None:
    _refused(["run", *SHAPE, *extra, "--storage", str(tmp_path / "r.db")], said)
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("value", ["1_024", "\u0662\u0667", "２７", " 27x", "1e3", "0x1b"])
def test_shape_numbers_are_ascii_decimal(value, tmp_path) -> None:
    args = ["run", "--family", "direct_naive", "--shape", f"N={value},K=3,C=1,F=2"]
    _refused([*args, "--storage", str(tmp_path / "r.db")], "not an integer")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def results_db(tmp_path_factory) -> Path:
    from autotune.store import Store

    db = tmp_path_factory.mktemp("hostile") / "r.db"
    Store(db).close()
    return db


_BAD_NUMBER = st.sampled_from(
    ["nan", "inf", "-inf", "1e300", "-1", "0", "1_0", "\u0661", "", " ", "0x10", "1.5", "abc"]
) | st.text(max_size=8).filter(lambda t: not t.strip().isascii() or not t.strip().isdigit())
_OPTIONS = [
    (["status"], "--minutes"),
    (["run", *SHAPE], "--budget"),
    (["run", *SHAPE], "--seed"),
    (["run", *SHAPE], "--jobs"),
    (["run", *SHAPE], "--time-limit"),
    (["run", "--family", "direct_naive"], "--shape"),
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(option=st.sampled_from(_OPTIONS), value=_BAD_NUMBER)
def test_any_bad_number_is_one_line_and_the_database_is_unchanged(results_db, option, value):
    command, name = option
    if name == "--shape":
        value = f"N={value},K=3,C=1,F=2"
    elif re.fullmatch(r"\s*[0-9]+\s*", value) and int(value) > 0:
        return  # a valid count
    elif name in ("--minutes", "--time-limit") and re.fullmatch(r"\s*[0-9]+\.[0-9]*\s*", value):
        if 1 <= float(value) <= 10**6:
            return  # a valid time
    before = _digest(results_db)
    result = CliRunner().invoke(main, [*command, name, value, "--storage", str(results_db)])
    assert result.exit_code != 0, (name, value, result.output)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert _digest(results_db) == before


# ---------------------------------------------------------------------------------------------
# Files nested deeper than Python's parsers recurse (RecursionError), and places not writable

DEEP = 100_000


def _deep_json(kind: str) -> str:
    if kind == "array":
        return "[" * DEEP + "]" * DEEP
    return '{"a":' * DEEP + "1" + "}" * DEEP


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("gzipped", [False, True])
def test_import_kt_cache_of_json_nested_too_deeply(tmp_path, kind, gzipped) -> None:
    import gzip

    data = _deep_json(kind).encode()
    path = tmp_path / ("deep.json.gz" if gzipped else "deep.json")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    _refused(["import-kt-cache", str(path), "--output", str(tmp_path / "out")], "nested too deeply")
    assert not (tmp_path / "out").exists()


KT_CACHE = (
    Path(__file__).resolve().parents[1] / "data" / "kernel_tuner" / "pnpoly_RTX_2080_Ti.json.gz"
)


def test_import_kt_cache_into_a_place_that_cannot_be_written(tmp_path) -> None:
    (tmp_path / "file").write_text("a file, not a directory")
    args = ["import-kt-cache", str(KT_CACHE), "--output", str(tmp_path / "file" / "out")]
    _refused(args, "cannot write --output")


@pytest.mark.parametrize(
    ("option", "name", "text"),
    [
        ("--shape-file", "s.toml", "shapes = " + "[" * DEEP + "]" * DEEP + "\n"),
        ("--subspace", "p.toml", "[direct_naive]\nBLOCK_X = " + "[" * DEEP + "]" * DEEP + "\n"),
        ("--replay", "r.jsonl.gz", None),
    ],
)
def test_run_files_nested_too_deeply(tmp_path, option, name, text) -> None:
    import gzip
    import json

    from tests.unit.test_hostile_files import recording_lines

    path = tmp_path / name
    if text is None:
        lines = "".join(json.dumps(x) + "\n" for x in recording_lines()[:2])
        path.write_bytes(gzip.compress((lines + _deep_json("array") + "\n").encode()))
    else:
        path.write_text(text)
    shape = [] if option == "--shape-file" else ["--shape", "N=9,K=3,C=1,F=2"]
    args = ["run", "--family", "direct_naive", *shape, option, str(path)]
    _refused([*args, "--storage", str(tmp_path / "r.db")], "nested too deeply")
    assert not (tmp_path / "r.db").exists()


def test_a_kernel_directory_toml_nested_too_deeply(tmp_path) -> None:
    (tmp_path / "mine.cu").write_text("")
    (tmp_path / "mine.toml").write_text("x = " + "[" * DEEP + "]" * DEEP + "\n")
    _refused(["families", "--kernels", str(tmp_path)], "nested too deeply")
