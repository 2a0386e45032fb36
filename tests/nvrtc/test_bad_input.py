"""Bad input through the CLI: one line naming the problem, its exit code, the results untouched.

One table; tests/test_cli.py holds the cases it had before this one (unknown family for `space`
and `run`, N=0, F=-1, missing fields, a missing shape file, --budget 0, a corrupt database, ...).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

import autotune.gpu.evaluator
import autotune.model.shapes
from autotune.cli.app import main
from autotune.families import get_family, kernel_digests
from autotune.model.problem import ConvProblem
from autotune.model.records import Measurement
from autotune.model.space import Config
from autotune.store import Store
from tests.conftest import SyntheticEvaluator

Prepare = Callable[[Path, pytest.MonkeyPatch], None]
# Tunes direct_naive on the synthetic GPU into the stored database unless the input is refused.
RUN = ("run", "--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2", "--no-baseline")
RUN += ("--storage", "{db}", "--cache-dir", "{tmp}/cubins")
SPACE = ("space", "direct_naive", "--shape", "N=9,K=3,C=1,F=2")
PARAMETERS = "[parameters]\nBLOCK_X = [8, 16]\nBLOCK_Y = [4]\nFILTER_IN_CONST = [0]\n"


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]  # {db}: a database with stored results; {tmp}: the test's directory
    code: int
    message: str  # in the last line of the output, which must be the error
    prepare: Prepare | None = None
    real_gpu: bool = False  # the machine's own GPU worker, with no device visible to it


def space_file(text: str) -> Prepare:
    """direct_naive's search space replaced by text (in a directory of the test's own)."""

    def prepare(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        family = get_family("direct_naive")
        spaces = tmp / "spaces"
        spaces.mkdir()
        shutil.copy(family.source_path, spaces)
        (spaces / "direct_naive.toml").write_text(text.replace("{tmp}", str(tmp)))
        monkeypatch.setattr(family, "directory", spaces)

    return prepare


def constraint(source: str) -> Prepare:
    quoted = source.replace("\\", "\\\\").replace('"', '\\"')
    return space_file(f'constraints = ["{quoted}"]\n{PARAMETERS}')


def a_file(name: str, text: str) -> Prepare:
    def prepare(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        (tmp / name).write_text(text)

    return prepare


def a_binary_file(name: str, data: bytes) -> Prepare:
    def prepare(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        (tmp / name).write_bytes(data)

    return prepare


NOT_UTF8 = b"shapes = [{N = 8, K = 3, C = 1, F = 1}]\n# caf\xe9 in Latin-1\n"
HEADER = {"study": 0, "family": "direct_naive", "kind": "conv2d", "device": "Synthetic GPU"}
HEADER |= {"problem": {"N": 9, "K": 3, "C": 1, "F": 2}, "arch": "sm_90", "pins": {}}
OUTCOME = {"s": 0, "c": {"BLOCK_X": 8, "BLOCK_Y": 4, "FILTER_IN_CONST": 0}, "st": "OK", "t": 1.0}
REPLAY = ("run", "--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2")
REPLAY += ("--replay", "{tmp}/r.jsonl.gz", "--storage", "{db}")


def a_recording(header: dict, *outcomes: dict) -> Prepare:
    """A recording (gzip'd JSON lines) of one study."""

    def prepare(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        lines = [{"format": "autotune-recording/1"}, header, *outcomes]
        text = "".join(json.dumps(line) + "\n" for line in lines)
        (tmp / "r.jsonl.gz").write_bytes(gzip.compress(text.encode()))

    return prepare


def shape_sets(text: str) -> Prepare:
    def prepare(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        (tmp / "sets.toml").write_text(text)
        monkeypatch.setattr(autotune.model.shapes, "SHAPE_SETS_FILE", tmp / "sets.toml")

    return prepare


def schema_version(version: str) -> Prepare:
    """The database as a later autotune would leave it: another version, a table we lack."""

    def prepare(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        with sqlite3.connect(tmp / "results.db") as con:
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
            con.execute("DROP TABLE claims")

    return prepare


HOSTILE = "__import__('os').system('touch {tmp}/pwned')"

CASES = [
    # Malformed TOML: a search space, a shape file, the named shape sets.
    Case("space-toml-malformed", RUN, 2, "malformed TOML", space_file("constraints = [\n[x]\n")),
    Case("space-toml-unknown-section", RUN, 2, "unknown section(s) tunables",
         space_file(f"[tunables]\nA = [1]\n{PARAMETERS}")),
    Case("shape-file-toml-malformed", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "malformed TOML", a_file("s.toml", "shapes = [{N = 1,\n")),
    Case("shape-file-csv-not-a-number", (*RUN, "--shape-file", "{tmp}/s.csv"), 2,
         "C='x' is not an integer", a_file("s.csv", "N,K,C,F\n8,3,x,1\n")),
    Case("shape-sets-toml-malformed", (*RUN[:3], "--shapes", "general", *RUN[5:]), 2,
         "malformed TOML", shape_sets("[general\n")),
    Case("shape-sets-toml-malformed-listing", ("shapes",), 2, "malformed TOML",
         shape_sets("[general\n")),
    # Files that are not UTF-8, TOML shape files of the wrong types, silent truncation.
    Case("shape-file-toml-not-utf8", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "is not UTF-8 text", a_binary_file("s.toml", NOT_UTF8)),
    Case("shape-file-csv-not-utf8", (*RUN, "--shape-file", "{tmp}/s.csv"), 2,
         "is not UTF-8 text", a_binary_file("s.csv", b"N,K,C,F\n8,3,1,1\n\xff\xfe,1,1,1\n")),
    Case("subspace-not-utf8", (*RUN, "--subspace", "{tmp}/p.toml"), 2, "is not UTF-8 text",
         a_binary_file("p.toml", b"[direct_naive]\nBLOCK_X = [8] # \xe9\n")),
    Case("shape-file-toml-shapes-a-number", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "'shapes' and 'layers' must be lists of tables", a_file("s.toml", "shapes = 5\n")),
    Case("shape-file-toml-shapes-of-numbers", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "'shapes' and 'layers' must be lists of tables", a_file("s.toml", "shapes = [5]\n")),
    Case("shape-file-toml-grid-scalar", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "'grid' must be a table of value lists", a_file("s.toml", "grid = 5\n")),
    Case("shape-file-toml-grid-of-scalars", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "'grid' must be a table of value lists",
         a_file("s.toml", "grid = {N = 8, K = 3, C = 1, F = 1}\n")),
    Case("shape-file-toml-kind-a-list", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "unknown problem kind [1]",
         a_file("s.toml", "kind = [1]\nshapes = [{N = 8, K = 3, C = 1, F = 1}]\n")),
    Case("shape-file-toml-fractional-size", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "shape field N=27.9 is not an integer",
         a_file("s.toml", "shapes = [{N = 27.9, K = 3, C = 1, F = 1}]\n")),
    Case("shape-file-toml-boolean-size", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "shape field K=True is not an integer",
         a_file("s.toml", "shapes = [{N = 8, K = true, C = 1, F = 1}]\n")),
    Case("shape-file-a-directory", (*RUN, "--shape-file", "{tmp}"), 2, "is a directory"),
    Case("shape-file-toml-empty", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "s.toml: a shape set needs 'grid', 'layers' or 'shapes'", a_file("s.toml", "")),
    # Recordings with values of the wrong types.
    Case("recording-config-a-list", REPLAY, 2, "config must be a dict",
         a_recording(HEADER, {**OUTCOME, "c": [8, 4, 0]})),
    Case("recording-pins-nested-lists", REPLAY, 2, "BLOCK_X must be a value or a list of values",
         a_recording({**HEADER, "pins": {"BLOCK_X": [[8]]}}, OUTCOME)),
    Case("recording-time-a-string", REPLAY, 2, "time '1.0' is not a number",
         a_recording(HEADER, {**OUTCOME, "t": "1.0"})),
    Case("recording-problem-a-list", REPLAY, 2, "a shape must be a table of fields",
         a_recording({**HEADER, "problem": [9, 3, 1, 2]}, OUTCOME)),
    # --output into a place that cannot be written.
    Case("best-output-unwritable", ("best", "--storage", "{db}", "--output", "/proc/nope/b.md"),
         2, "cannot write --output"),
    Case("best-output-below-a-file", ("best", "--storage", "{db}", "--output", "{tmp}/f/b.md"),
         2, "cannot write --output", a_file("f", "a file, not a directory")),
    Case("best-output-a-directory", ("best", "--storage", "{db}", "--output", "{tmp}"), 2,
         "is a directory"),
    Case("plot-output-unwritable", ("plot", "--storage", "{db}", "--output", "/proc/nope/p"),
         2, "cannot write --output"),
    Case("report-output-unwritable",
         ("report", "--storage", "{db}", "--output-dir", "{tmp}/f/report"), 2,
         "cannot write --output-dir", a_file("f", "a file, not a directory")),
    Case("export-recording-output-unwritable",
         ("export-recording", "--storage", "{db}", "--output", "/proc/nope/r.jsonl.gz"), 2,
         "cannot write --output"),
    # Unknown names: family, parameter, shape set, option, strategy.
    Case("unknown-family-best", ("best", "--family", "nope", "--storage", "{db}"), 2,
         "unknown family 'nope'"),
    Case("unknown-parameter-in-constraint", RUN, 2, "names unknown BLOCK_Z",
         constraint("BLOCK_Z > 1")),
    Case("parameter-not-upper-snake", RUN, 2, "'block_x' must be an UPPER_SNAKE identifier",
         space_file("[parameters]\nblock_x = [8]\n")),
    Case("unknown-shape-set-listing", ("shapes", "nope"), 2, "unknown shape set 'nope'"),
    Case("unknown-option", (*RUN, "--bogus"), 2, "No such option '--bogus'"),
    Case("unknown-strategy", (*RUN, "--strategy", "nope"), 2, "Invalid value for '--strategy'"),
    Case("time-limit-nan", (*RUN, "--time-limit", "nan"), 2, "is not a finite decimal number"),
    Case("time-limit-inf", (*RUN, "--time-limit", "inf"), 2, "is not a finite decimal number"),
    Case("remeasure-time-limit-nan", ("remeasure", "--time-limit", "nan"), 2, "not a finite"),
    # Constraints: a syntax error, hostile ones (never run: the pwned file must not appear).
    Case("constraint-syntax-error", RUN, 2, "'BLOCK_X <' is not valid: invalid syntax",
         constraint("BLOCK_X <")),
    Case("constraint-import", RUN, 2, "function call is not allowed", constraint(HOSTILE)),
    Case("constraint-import-space", SPACE, 2, "function call is not allowed",
         constraint(HOSTILE)),
    Case("constraint-attribute", RUN, 2, "attribute access is not allowed",
         constraint("N.__class__.__name__ == 'int'")),
    Case("space-product-too-large", RUN, 2, "configurations at BLOCK_Y before its constraints",
         space_file("constraints = ['BLOCK_X < BLOCK_Y']\n[parameters]\n"
                    f"BLOCK_X = {list(range(1, 3001))}\nBLOCK_Y = {list(range(1, 3001))}\n"
                    "FILTER_IN_CONST = [0]\n")),
    Case("constraint-huge-exponent", RUN, 2, "operator ** is not allowed",
         constraint("9**9**9 > 0")),
    Case("constraint-string-repetition", RUN, 2, "arithmetic on a string is not allowed",
         constraint("'x' * 99999999999 == 'y'")),
    Case("constraint-division-by-zero", RUN, 2, "'1 // 0 == 0': division by zero",
         constraint("1 // 0 == 0")),
    Case("constraint-modulo-by-zero", RUN, 2, "division by zero (BLOCK_X - BLOCK_X is 0)",
         constraint("N % (BLOCK_X - BLOCK_X) == 0")),
    Case("constraint-division-by-zero-space", SPACE, 2, "division by zero",
         constraint("N / (FILTER_IN_CONST * 0) > 1")),
    # Impossible shapes.
    Case("filter-larger-than-input", (*RUN, "--shape-file", "{tmp}/s.csv"), 2,
         "filter Kc=5 is larger than the input Cc=4",
         a_file("s.csv", "D,R,Cc,Kd,Kr,Kc\n8,8,4,3,3,5\n")),
    Case("zero-stride", (*RUN, "--shape", "N=8,K=3,C=1,F=1,stride=0"), 2,
         "stride must be at least 1, got 0"),
    Case("negative-batch", (*RUN, "--shape", "N=8,K=3,C=1,F=1,B=-2"), 2,
         "B must be at least 1, got -2"),
    Case("zero-size-in-shape-file", (*RUN, "--shape-file", "{tmp}/s.toml"), 2,
         "N must be at least 1, got 0",
         a_file("s.toml", "shapes = [{N = 0, K = 3, C = 1, F = 1}]\n")),
    Case("c-not-1-for-chen-special", ("space", "chen_special", "--shape", "N=16,K=3,C=2,F=1"), 2,
         "chen_special computes one input channel, not C=2"),
    # A space with no valid configuration.
    Case("no-valid-configuration-run", RUN, 2, "nothing to tune", constraint("BLOCK_X > 4096")),
    Case("no-valid-configuration-space", SPACE, 2,
         "direct_naive has no valid configuration at N=9,K=3,C=1,F=2 on sm_90",
         constraint("BLOCK_X > 4096")),
    # Storage that cannot be reached or created.
    Case("storage-postgresql-unreachable",
         (*RUN[:-4], "--storage", "postgresql://nobody@127.0.0.1:1/x"), 1,
         "cannot open results database (postgresql://nobody@127.0.0.1:1/x)"),
    Case("storage-sqlite-in-uncreatable-directory",
         (*RUN[:-4], "--storage", "/proc/no-such-dir/r.db"), 1,
         "cannot open results database (/proc/no-such-dir/r.db)"),
    Case("storage-sqlite-below-a-file", (*RUN[:-4], "--storage", "{tmp}/plain/r.db"), 1,
         "cannot create results database", a_file("plain", "a file, not a directory")),
    # No GPU; a results database of a later schema.
    Case("no-gpu", RUN, 1, "no usable CUDA GPU", real_gpu=True),
    Case("future-schema-run", RUN, 1, "has schema version 99, this autotune uses schema version",
         schema_version("99")),
    Case("future-schema-best", ("best", "--storage", "{db}"), 1, "has schema version 99",
         schema_version("99")),
]  # fmt: skip


def _stored(db: Path) -> list[str]:
    """Every table's schema and rows, as SQL text."""
    with sqlite3.connect(db) as con:
        return list(con.iterdump())


@pytest.fixture(scope="module")
def results_db(tmp_path_factory) -> Path:
    """A database with results of the synthetic GPU (the device the CLI will register)."""
    path = tmp_path_factory.mktemp("stored") / "results.db"
    problem = ConvProblem(N=9, K=3, C=1, F=2)
    digest = kernel_digests()["direct_naive"]  # the current code's rows: what `best` reads
    with Store(path) as store:
        device_id = store.register_device(SyntheticEvaluator(lambda d: 1.0).device)
        run_id = store.start_run(device_id, "autotune run", {})
        for block_x, ms in ((8, 1.5), (16, 1.0)):
            config = Config.of({"BLOCK_X": block_x, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
            m = Measurement.from_samples([ms, ms])
            store.record(
                run_id, device_id, "direct_naive", problem, config, m, problem.flops, digest
            )
        store.finish_run(run_id)
    return path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_in_one_line_leaving_results_intact(
    case: Case, results_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "results.db"
    shutil.copy(results_db, db)
    if case.prepare:
        case.prepare(tmp_path, monkeypatch)
    if case.real_gpu:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # inherited by the GPU worker
    else:
        monkeypatch.setattr(
            autotune.gpu.evaluator,
            "GpuEvaluator",
            lambda index=0: SyntheticEvaluator(lambda d: 1.0),
        )
    before = _stored(db)
    args = [a.replace("{db}", str(db)).replace("{tmp}", str(tmp_path)) for a in case.args]

    result = CliRunner().invoke(main, args)

    assert result.exit_code == case.code, result.output
    assert isinstance(result.exception, SystemExit), "not a handled error"
    assert "Traceback" not in result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(("autotune: ", "Error: ")), result.output
    assert case.message in last, result.output
    assert _stored(db) == before  # not a row changed, not a table added
    assert not (tmp_path / "pwned").exists()


def test_the_run_without_a_valid_configuration_names_why(tmp_path, monkeypatch) -> None:
    constraint("BLOCK_X > 4096")(tmp_path, monkeypatch)
    monkeypatch.setattr(
        autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: SyntheticEvaluator(lambda d: 1.0)
    )
    args = [a.replace("{db}", str(tmp_path / "r.db")).replace("{tmp}", str(tmp_path)) for a in RUN]
    output = CliRunner().invoke(main, args).output
    assert "skipping direct_naive N=9,K=3,C=1,F=2: no valid configuration on this device" in output


def test_a_shape_no_device_can_hold_says_why_nothing_runs(tmp_path, monkeypatch) -> None:
    def gpu(index=0):
        evaluator = SyntheticEvaluator(lambda d: 1.0)
        evaluator.device = dataclasses.replace(evaluator.device, memory_bytes=80 << 30)
        return evaluator

    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", gpu)
    args = ["run", "--shape", "N=4096,K=3,C=256,F=256,B=8", "--no-baseline"]
    result = CliRunner().invoke(main, [*args, "--storage", str(tmp_path / "r.db")])
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("autotune: nothing to tune: no (family, shape) pair can run (")
    shape = "N=4096,K=3,C=256,F=256,B=8"
    memory = "its inputs and outputs alone take 275.0 GB, the device has 85.9 GB"
    assert f"skipping direct_naive {shape}: {memory}" in result.output
    assert f"chen_special {shape}: chen_special computes one input channel" in last
