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


# ---------------------------------------------------------------------------------------------
# One line, quoted short and escaped; one value per option


@pytest.mark.parametrize(
    "args",
    [
        ["best", "--family", "direct_naive", "--family", "sgemm"],
        ["plot", "--family", "direct_naive", "--family=sgemm"],
        ["forget", "--family", "direct_naive", "--yes", "--family", "sgemm"],
        ["run", *SHAPE, "--budget", "3", "--budget", "4"],
        ["bench", "search", "--seeds", "1", "--seeds", "2"],
    ],
)
def test_an_option_taking_one_value_given_twice_is_refused(tmp_path, args) -> None:
    db = tmp_path / "r.db"
    _refused([*args, "--storage", str(db)], "given twice")
    assert not db.exists()


def test_an_option_given_twice_as_the_value_of_another_is_not_counted(tmp_path) -> None:
    # --shape's value is the text "--family": parsing, not counting, decides what it is.
    result = CliRunner().invoke(main, ["space", "direct_naive", "--shape", "--family"])
    assert "given twice" not in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["status", "--minutes", "nan"], "Invalid value for '--minutes'"),
        (["bogus"], "No such command 'bogus'"),
        (["run", "--bogus"], "No such option '--bogus'"),
        (["space"], "Missing argument 'FAMILY'"),
        (["run", "--strategy", "nope", *SHAPE], "Invalid value for '--strategy'"),
        (["bench", "search", "--jobs", "x"], "Invalid value for '--jobs'"),
    ],
)
def test_clicks_own_errors_are_one_line_with_exit_code_2(args, said) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()  # not Usage: / Try ... / Error: on 4 lines
    assert line.startswith("autotune: ") and said in line and "--help" in line


def test_a_shape_file_error_quotes_a_short_escaped_excerpt(tmp_path) -> None:
    secret = "root:$6$" + "x" * 200 + ":19000:0:99999:7:::"
    path = tmp_path / "s.csv"
    path.write_text(f"{secret}\n\x1b]0;pwned\x07{secret}\n")
    line = _refused(["run", "--family", "direct_naive", "--shape-file", str(path)])
    assert "\x1b" not in line and "\x07" not in line
    assert secret not in line and len(line) < 200 + len(str(path))


def test_file_contents_printed_back_are_escaped(tmp_path) -> None:
    import json

    from tests.unit.test_kt_cache import cache_data

    path = tmp_path / "c.json"
    path.write_text(json.dumps(cache_data(device="GPU\x1b[2J\x1b]0;title\x07")))
    result = CliRunner().invoke(main, ["import-kt-cache", str(path), "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "GPU\\x1b[2J" in result.output


def test_an_error_quoting_a_file_is_escaped(tmp_path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('kind = "\\u001b[31mconv9d\\u202e"\nshapes = []\n')
    line = _refused(["run", "--family", "direct_naive", "--shape-file", str(path)])
    assert "\x1b" not in line and "\u202e" not in line and "\\x1b[31m" in line
