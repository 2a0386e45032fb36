"""Kernel Tuner's cache and T4 files as recordings (problem kind "recorded"): the reader, its
one-line errors, the import command and replay through the tuner. Synthetic files written here,
and one real file of the benchmark hub."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.kt.cache import KtCacheError, kt_cache, read_kt_file
from autotune.model.parsing import problem_from_dict
from autotune.model.problem import RecordedProblem
from autotune.model.records import Status
from autotune.model.space import Config
from autotune.replay.recorded import ListedSpace
from autotune.replay.recording import load_recording, load_recordings, save_recording

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner"
REPO = Path(__file__).resolve().parents[2]
KEYS = ["block_size_x", "tile", "use_shmem"]
PARAMS = {"block_size_x": [16, 32, 64, 128], "tile": [1, 2, 4], "use_shmem": [0, 1]}


def synthetic_time(bx: int, tile: int, shmem: int, shift: int = 0) -> float | str:
    """A bowl around block 64, tile 2 (moved by `shift` steps of block size on another GPU);
    tile 4 with block 128 fails to compile, shared memory at block 16 fails at run time."""
    if tile == 4 and bx == 128:
        return "CompilationFailedConfig"
    if shmem and bx == 16:
        return "RuntimeFailedConfig"
    x = math.log2(bx) - 6 - shift
    return round(1.0 + x * x + (math.log2(tile) - 1) ** 2 + 0.3 * shmem, 6)


def cache_data(device: str = "Synthetic GPU", shift: int = 0, drop=()) -> dict:
    """A Kernel Tuner cache: every config but those in `drop` (the restrictions' work)."""
    cache = {}
    for bx in PARAMS["block_size_x"]:
        for tile in PARAMS["tile"]:
            for shmem in PARAMS["use_shmem"]:
                if (bx, tile, shmem) in drop:
                    continue
                entry = {"block_size_x": bx, "tile": tile, "use_shmem": shmem}
                entry["time"] = synthetic_time(bx, tile, shmem, shift)
                entry["times"] = [0.1, 0.2]
                cache[f"{bx},{tile},{shmem}"] = entry
    return {
        "device_name": device,
        "kernel_name": "toy_kernel",
        "problem_size": [512, 256],
        "tune_params_keys": KEYS,
        "tune_params": PARAMS,
        "objective": "time",
        "cache": cache,
    }


def write(path: Path, data: object, gz: bool = False, text: str | None = None) -> Path:
    raw = (text if text is not None else json.dumps(data)).encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


# ---------------------------------------------------------------------------------------------
# Reading


def test_a_cache_file_becomes_a_recorded_study_with_failures_kept(tmp_path) -> None:
    path = write(tmp_path / "toy.json", cache_data(drop={(128, 1, 0)}))
    study = read_kt_file(path)
    assert study.family == "toy_kernel" and study.device == "Synthetic GPU"
    assert study.problem == RecordedProblem(512, 256) and study.problem.key == "X=512,Y=256"
    assert [name for name, _ in study.tunables] == KEYS  # the file's order, not sorted
    assert len(study.outcomes) == 4 * 3 * 2 - 1
    ok = study.outcomes[Config.of({"block_size_x": 64, "tile": 2, "use_shmem": 0})]
    assert ok.status is Status.OK and ok.time_ms == 1.0
    compile_error = study.outcomes[Config.of({"block_size_x": 128, "tile": 4, "use_shmem": 1})]
    assert compile_error.status is Status.COMPILE_ERROR and compile_error.time_ms is None
    launch = study.outcomes[Config.of({"block_size_x": 16, "tile": 1, "use_shmem": 1})]
    assert launch.status is Status.LAUNCH_ERROR
    # The file's configurations are the space: the dropped one is not valid.
    space = study.space()
    assert isinstance(space, ListedSpace) and len(space) == 23
    assert not space.is_valid(Config.of({"block_size_x": 128, "tile": 1, "use_shmem": 0}))
    assert study.exhaustive(space) and study.optimum_ms() == 1.0


def test_gzip_an_unclosed_cache_and_a_t4_file_read_the_same(tmp_path) -> None:
    data = cache_data()
    plain = read_kt_file(write(tmp_path / "a.json", data))
    zipped = read_kt_file(write(tmp_path / "a.json.gz", data, gz=True))
    # Kernel Tuner appends entries to an open file and closes it at the end of a run.
    text = json.dumps(data, indent="")
    unclosed = read_kt_file(write(tmp_path / "open.json", None, text=text[:-3] + ","))
    assert plain.outcomes == zipped.outcomes == unclosed.outcomes
    t4 = {"metadata": {"timeunit": "seconds"}, "schema_version": "1.0.0", "results": []}
    for entry in data["cache"].values():
        config = {k: entry[k] for k in KEYS}
        time = entry["time"]
        failed = {"CompilationFailedConfig": "compile", "RuntimeFailedConfig": "runtime"}
        result = {"configuration": config, "invalidity": failed.get(time, "correct")}
        if result["invalidity"] == "correct":
            result["measurements"] = [{"name": "time", "value": time / 1e3, "unit": "s"}]
            result["objectives"] = ["time"]
        t4["results"].append(result)
    from_t4 = read_kt_file(write(tmp_path / "Synthetic_T4.json", t4), family="toy_kernel")
    assert from_t4.device == "Synthetic" and from_t4.tunables == plain.tunables
    assert {
        c: (o.status, o.time_ms and round(o.time_ms, 9)) for c, o in from_t4.outcomes.items()
    } == {c: (o.status, o.time_ms) for c, o in plain.outcomes.items()}


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        (b"{not json", "not JSON"),
        (b"\x1f\x8b\x08\x00garbage", "broken gzip"),
        (b'{"results_missing": 1}', "neither a Kernel Tuner cache file"),
        ("bad value", "is not among its tune_params"),
        ("bad failure", "unknown failure 'Segfault'"),
        ("bad time", "not a number"),
        ("missing parameter", "lacks parameter 'tile'"),
        ("bad size", "problem_size"),
    ],
)
def test_a_bad_file_is_a_one_line_error(tmp_path, content, message) -> None:
    path = tmp_path / "bad.json"
    data = cache_data()
    first = next(iter(data["cache"].values()))
    if content == "bad value":
        first["block_size_x"] = 7
    elif content == "bad failure":
        first["time"] = "Segfault"
    elif content == "bad time":
        first["time"] = [1.0]
    elif content == "missing parameter":
        del first["tile"]
    elif content == "bad size":
        data["problem_size"] = "callable"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        write(path, data)
    with pytest.raises(KtCacheError) as err:
        read_kt_file(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(path) in str(err.value)


def test_the_real_hub_file_reads_as_its_committed_recording() -> None:
    """The benchmark hub's point-in-polygon cache of the RTX 2080 Ti: 4092 configurations, the
    failures Kernel Tuner recorded, and the recording committed under results/ is this file."""
    study = read_kt_file(DATA / "pnpoly_RTX_2080_Ti.json.gz", family="pnpoly")
    assert study.device == "NVIDIA GeForce RTX 2080 Ti" and study.arch == "sm_75"
    assert study.problem == RecordedProblem(20000000)
    statuses = [o.status for o in study.outcomes.values()]
    assert len(statuses) == 4092 and statuses.count(Status.LAUNCH_ERROR) == 358
    committed = REPO / "results/recordings/kernel_tuner/pnpoly_NVIDIA_GeForce_RTX_2080_Ti.jsonl.gz"
    (recorded,) = load_recording(committed)
    assert recorded.outcomes == study.outcomes and recorded.tunables == study.tunables


# ---------------------------------------------------------------------------------------------
# Recordings, the import command and replay


def test_a_recorded_study_round_trips_through_a_recording(tmp_path) -> None:
    study = read_kt_file(write(tmp_path / "toy.json", cache_data()))
    save_recording([study], tmp_path / "rec.jsonl.gz")
    (back,) = load_recording(tmp_path / "rec.jsonl.gz")
    assert back.problem == study.problem and back.tunables == study.tunables
    assert back.outcomes == study.outcomes
    assert back.space().configs == study.space().configs
    assert problem_from_dict(study.problem.as_dict(), "recorded") == study.problem


def test_written_back_as_a_cache_it_reads_the_same(tmp_path) -> None:
    study = read_kt_file(write(tmp_path / "toy.json", cache_data()))
    again = read_kt_file(write(tmp_path / "back.json", kt_cache(study, kernel_name="toy")))
    assert {c: (o.status, o.time_ms) for c, o in again.outcomes.items()} == {
        c: (o.status, o.time_ms) for c, o in study.outcomes.items()
    }
    assert again.tunables == study.tunables and again.problem == study.problem


def test_import_command_writes_recordings_and_says_what_it_read(tmp_path) -> None:
    files = [
        write(tmp_path / "A.json.gz", cache_data("GPU A"), gz=True),
        write(tmp_path / "B.json", cache_data("GPU B", shift=1)),
    ]
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["import-kt-cache", *map(str, files), "--output", str(out), "--family", "toy"]
    )
    assert result.exit_code == 0, result.output
    assert "24 configurations of 24" in result.output and "19 ran, 5 failed" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["toy_GPU_A.jsonl.gz", "toy_GPU_B.jsonl.gz"]
    assert {s.device for s in load_recordings([out])} == {"GPU A", "GPU B"}


def test_import_command_fails_in_one_line_and_writes_nothing(tmp_path) -> None:
    good = write(tmp_path / "good.json", cache_data())
    bad = write(tmp_path / "bad.json", None, text="[1, 2]")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["import-kt-cache", str(good), str(bad), "--output", str(out)]
    )
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0 and "bad.json: neither" in result.output
    assert not out.exists()


def test_run_replays_a_recorded_space_through_the_tuner(tmp_path) -> None:
    study = read_kt_file(write(tmp_path / "toy.json", cache_data()), family="toy")
    save_recording([study], tmp_path / "toy.jsonl.gz")
    db = tmp_path / "replay.db"
    args = ["run", "--replay", str(tmp_path / "toy.jsonl.gz"), "--budget", "24"]
    result = CliRunner().invoke(main, [*args, "--storage", f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output
    assert "24 new evaluations" in result.output and "5 failed" in result.output
    assert '"block_size_x":64' in result.output and "1.0" in result.output  # the optimum
    wrong = CliRunner().invoke(main, [*args, "--family", "other"])
    assert wrong.exit_code == 1 and "no family 'other' (toy)" in wrong.output


def test_a_replay_starts_at_the_best_configs_of_the_same_space_on_another_gpu(tmp_path) -> None:
    """Transfer across GPUs in the tuner: with GPU B's evaluations of the same family and shape
    in the store, GPU A's study asks B's best config first (B's optimum is block 128)."""
    from autotune.store import Store

    db = f"sqlite:///{tmp_path / 'both.db'}"
    for device, shift, budget in (("GPU B", 1, "24"), ("GPU A", 0, "1")):
        study = read_kt_file(write(tmp_path / f"{device}.json", cache_data(device, shift)), "toy")
        save_recording([study], tmp_path / f"{device}.jsonl.gz")
        args = ["run", "--replay", str(tmp_path / f"{device}.jsonl.gz"), "--budget", budget]
        result = CliRunner().invoke(main, [*args, "--storage", db])
        assert result.exit_code == 0, result.output
    (first,) = Store(db).history(device="GPU A (replay)")["config"]
    assert Config.from_json(first) == Config.of({"block_size_x": 128, "tile": 2, "use_shmem": 0})
