"""Any bytes as a shape file, a subspace file or a recording: `autotune run` either tunes, or
says what is wrong in one line with exit 2; never a traceback, and a refused input leaves the
results database as it was (property tests, hypothesis)."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import autotune.gpu.evaluator
from autotune.cli.app import main
from autotune.model.problem import ConvProblem
from autotune.model.records import Measurement
from autotune.model.space import Config
from autotune.store import Store
from tests.conftest import SyntheticEvaluator

# Each example is a whole CLI run (a valid one compiles once, then hits the cubin cache); 400
# examples each (45 s on two cores) found the last bug fixed here, 40 keep the suite quick.
SOME = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
PROBLEM = ConvProblem(N=9, K=3, C=1, F=2)
RUN = ["run", "--family", "direct_naive", "--budget", "1", "--jobs", "1", "--no-baseline"]
FIELDS = ("N", "K", "C", "F", "B", "stride", "M", "D", "R", "Cc", "Kd", "Kr", "Kc", "name")

# ---------------------------------------------------------------------------------------------
# Inputs: structured text near the valid forms, with arbitrary bytes spliced in

INTS = st.one_of(st.integers(-3, 40), st.integers(-(2**70), 2**70))
SCALARS = st.one_of(
    INTS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=8),
)


def toml_literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string is a JSON string
    if isinstance(value, list):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_literal(v)}" for k, v in value.items()) + "}"
    return str(value)


TOML_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(FIELDS), inner, max_size=6),
    ),
    max_leaves=12,
)
SHAPE_TABLES = st.dictionaries(st.sampled_from(FIELDS), INTS | SCALARS, max_size=7)
SHAPE_TOML = st.one_of(
    st.builds(lambda s: f"shapes = {toml_literal(s)}\n", st.lists(SHAPE_TABLES, max_size=3)),
    st.builds(
        lambda k, v: f"kind = {toml_literal(k)}\nshapes = {toml_literal(v)}\n",
        st.sampled_from(["conv2d", "gemm", "conv3d", "conv4d"]) | SCALARS,
        TOML_VALUES,
    ),
    st.builds(
        lambda g: f"grid = {toml_literal(g)}\n",
        st.dictionaries(
            st.sampled_from(FIELDS + ("CF",)), st.lists(INTS, max_size=2) | SCALARS, max_size=6
        ),
    ),
    st.builds(lambda k, v: f"{k} = {toml_literal(v)}\n", st.sampled_from(FIELDS), TOML_VALUES),
)
CSV_CELLS = st.one_of(INTS.map(str), st.text(max_size=6), st.just(""))
SHAPE_CSV = st.builds(
    lambda header, rows: ",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows),
    st.lists(st.sampled_from(FIELDS) | st.text(max_size=4), min_size=1, max_size=7),
    st.lists(st.lists(CSV_CELLS, max_size=8), max_size=3),
)
SUBSPACE = st.builds(
    lambda tables: "".join(
        f"[{family}]\n" + "".join(f"{k} = {toml_literal(v)}\n" for k, v in params.items())
        for family, params in tables.items()
    ),
    st.dictionaries(
        st.sampled_from(["direct_naive", "sgemm", "nope"]),
        st.dictionaries(
            st.sampled_from(["BLOCK_X", "BLOCK_Y", "FILTER_IN_CONST", "TILE"]),
            TOML_VALUES,
            max_size=3,
        ),
        max_size=2,
    ),
)


@st.composite
def spliced(draw, text: st.SearchStrategy[str], bom: bool = False) -> bytes:
    """The text's UTF-8 bytes, sometimes with a byte-order mark or arbitrary bytes spliced in."""
    data = draw(text).encode()
    if bom and draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return data


ANY_BYTES = st.binary(max_size=200)

# A recording of the one study, every valid config recorded: replaying it tunes.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | INTS | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


def recording_lines() -> list[dict]:
    header = {"study": 0, "family": "direct_naive", "kind": "conv2d", "device": "Synthetic GPU"}
    header |= {"problem": PROBLEM.as_dict(), "arch": "sm_90", "nvrtc": "13.0", "pins": {}}
    lines: list[dict] = [{"format": "autotune-recording/1"}, header]
    for block_x in (8, 16, 32, 64, 128, 256):
        for block_y in (1, 2, 4, 8, 16, 32):
            for in_const in (0, 1):
                config = {"BLOCK_X": block_x, "BLOCK_Y": block_y, "FILTER_IN_CONST": in_const}
                lines.append({"s": 0, "c": config, "st": "OK", "t": 1.0 + block_x / 100})
    return lines


@st.composite
def mutated_recording(draw) -> bytes:
    """The valid recording with one value somewhere replaced by any JSON value, a line
    dropped, or the gzip'd bytes cut short or replaced."""
    lines = recording_lines()
    how = draw(st.sampled_from(["replace", "drop", "truncate", "raw"]))
    if how == "raw":
        return draw(st.one_of(ANY_BYTES, ANY_BYTES.map(gzip.compress)))
    if how == "drop":
        del lines[draw(st.integers(0, min(2, len(lines) - 1)))]
    if how == "replace":
        line = lines[draw(st.sampled_from([0, 1, 1, 1, 2, 3]))]
        node: dict = line
        key = draw(st.sampled_from(sorted(node)))
        while isinstance(node[key], dict) and node[key] and draw(st.booleans()):
            node, key = node[key], draw(st.sampled_from(sorted(node[key])))
        node[key] = draw(JSON_VALUES)
    data = gzip.compress("".join(json.dumps(x) + "\n" for x in lines).encode())
    if how == "truncate":
        data = data[: draw(st.integers(0, len(data) - 1))]
    return data


# ---------------------------------------------------------------------------------------------
# The property


@pytest.fixture(scope="module")
def results_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("stored") / "results.db"
    with Store(path) as store:
        device_id = store.register_device(SyntheticEvaluator(lambda d: 1.0).device)
        run_id = store.start_run(device_id, "autotune run", {})
        config = Config.of({"BLOCK_X": 8, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
        m = Measurement.from_samples([1.5, 1.5])
        store.record(run_id, device_id, "direct_naive", PROBLEM, config, m, PROBLEM.flops)
        store.finish_run(run_id)
    return path


@pytest.fixture
def workdir(tmp_path, monkeypatch, results_db):
    monkeypatch.setattr(
        autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: SyntheticEvaluator(lambda d: 1.0)
    )
    return tmp_path


def dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as con:
        return list(con.iterdump())


def run_with(workdir: Path, results_db: Path, name: str, data: bytes, args: list[str]) -> int:
    here = Path(tempfile.mkdtemp(dir=workdir))  # a run may leave its database open
    db = here / "results.db"
    shutil.copy(results_db, db)
    (here / name).write_bytes(data)
    before = dump(db)
    args = [a.replace("{file}", str(here / name)) for a in args]
    storage = ["--storage", str(db), "--cache-dir", str(workdir / "cubins")]
    result = CliRunner().invoke(main, [*args, *storage])

    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 0:
        assert result.exception is None
        return 0
    assert isinstance(result.exception, SystemExit), "not a handled error"
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(("autotune: ", "Error: ")), result.output
    assert dump(db) == before
    return result.exit_code


VALID = [
    ("s.toml", b"shapes = [{N = 9, K = 3, C = 1, F = 2}]\n", "--shape-file"),
    ("s.csv", b"\xef\xbb\xbfN,K,C,F\n9,3,1,2\n", "--shape-file"),
    ("p.toml", b"[direct_naive]\nBLOCK_X = [8, 16]\n", "--subspace"),
    ("r.jsonl.gz", gzip.compress("".join(json.dumps(x) + "\n" for x in recording_lines()).encode()),
     "--replay"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "data", "option"), VALID, ids=[v[0] for v in VALID])
def test_the_valid_forms_tune(workdir, results_db, name, data, option) -> None:
    shape = [] if option == "--shape-file" else ["--shape", "N=9,K=3,C=1,F=2"]
    assert run_with(workdir, results_db, name, data, [*RUN, *shape, option, "{file}"]) == 0


@SOME
@given(data=st.one_of(spliced(SHAPE_TOML), ANY_BYTES))
@example(data=b"shapes = [{N = 27.9, K = 3, C = 1, F = 2}]\n")
def test_any_toml_shape_file(workdir, results_db, data: bytes) -> None:
    run_with(workdir, results_db, "s.toml", data, [*RUN, "--shape-file", "{file}"])


@SOME
@given(data=st.one_of(spliced(SHAPE_CSV, bom=True), ANY_BYTES))
def test_any_csv_shape_file(workdir, results_db, data: bytes) -> None:
    run_with(workdir, results_db, "s.csv", data, [*RUN, "--shape-file", "{file}"])


@SOME
@given(data=st.one_of(spliced(SUBSPACE), ANY_BYTES))
@example(data=b"[direct_naive]\nBLOCK_X = [[8]]\n")
def test_any_subspace_file(workdir, results_db, data: bytes) -> None:
    args = [*RUN, "--shape", "N=9,K=3,C=1,F=2", "--subspace", "{file}"]
    run_with(workdir, results_db, "p.toml", data, args)


@SOME
@given(data=mutated_recording())
def test_any_recording(workdir, results_db, data: bytes) -> None:
    args = [*RUN, "--shape", "N=9,K=3,C=1,F=2", "--replay", "{file}"]
    run_with(workdir, results_db, "r.jsonl.gz", data, args)
