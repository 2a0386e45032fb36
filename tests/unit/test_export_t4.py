"""`autotune export --format t4`: Kernel Tuner's T4 results files and simulation caches."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.families import FAMILIES
from autotune.kt.cache import read_kt_file
from autotune.kt.t4 import INVALIDITY, T4_VERSION, write_t4
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.store import Store

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", 132, "580", "13.0", "13.0", 1980, 80 << 30)
PROBLEM = ConvProblem(N=32, K=3, C=16, F=32)
FAMILY = "direct_naive"
DIGEST = FAMILIES[FAMILY].kernel_digest()  # the current code: the export reads only its rows
STUDY = Path("N_32_K_3_C_16_F_32") / FAMILY


def config(bx: int, by: int = 4) -> Config:
    return Config.of({"BLOCK_X": bx, "BLOCK_Y": by, "FILTER_IN_CONST": 0})


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    """A store with OK, failed and re-measured evaluations of one study, exported."""
    store = Store(str(tmp_path / "r.db"))
    device = store.register_device(H100)
    run = store.start_run(device, "autotune run", {"autotune": "0.1.0"})
    timed = {8: 0.030, 16: 0.020, 32: 0.025}
    for bx, t in timed.items():
        m = Measurement(Status.OK, time_ms=t, samples_ms=(t, t, t), compile_s=0.2)
        store.record(run, device, FAMILY, PROBLEM, config(bx), m, PROBLEM.flops, DIGEST)
    failed = Measurement(Status.COMPILE_ERROR, error="ptxas: too many resources")
    store.record(run, device, FAMILY, PROBLEM, config(64), failed, PROBLEM.flops, DIGEST)
    wrong = Measurement(Status.WRONG_RESULT, error="rel error 0.5")
    store.record(run, device, FAMILY, PROBLEM, config(8, 8), wrong, PROBLEM.flops, DIGEST)
    out = tmp_path / "t4"
    assert write_t4(store, out) == 1
    store.close()
    return out


def test_every_evaluation_is_a_t4_result_with_its_outcome(exported: Path) -> None:
    doc = json.loads((exported / STUDY / "NVIDIA_H100_80GB_HBM3_T4.json").read_text())
    assert doc["schema_version"] == T4_VERSION
    assert doc["metadata"] == {"timeunit": "milliseconds"}
    results = doc["results"]
    assert [r["invalidity"] for r in results] == [
        "correct",
        "correct",
        "correct",
        "compile",
        "correctness",
    ]
    assert [r["correctness"] for r in results] == [1, 1, 1, 0, 0]
    first = results[0]
    assert first["configuration"] == config(8).as_dict()
    assert first["times"] == {"runtimes": [0.03, 0.03, 0.03], "compilation": 0.2}
    assert {"name": "time", "value": 0.03, "unit": "ms"} in first["measurements"]
    assert first["objectives"] == ["time"]
    errors = [m for m in results[3]["measurements"] if m["name"] == "error"]
    assert errors == [{"name": "error", "value": "ptxas: too many resources", "unit": ""}]
    assert set(INVALIDITY) == set(Status)


def test_our_own_t4_reader_reads_it_back(exported: Path) -> None:
    study = read_kt_file(exported / STUDY / "NVIDIA_H100_80GB_HBM3_T4.json")
    assert study.family == FAMILY
    assert study.outcomes[config(16)].time_ms == pytest.approx(0.020)
    assert study.outcomes[config(64)].status is Status.COMPILE_ERROR
    assert study.outcomes[config(8, 8)].status is Status.WRONG_RESULT


def test_the_cache_holds_each_configuration_once_with_kernel_tuners_failures(exported) -> None:
    cache = json.loads((exported / STUDY / "NVIDIA_H100_80GB_HBM3_cache.json").read_text())
    assert cache["tune_params_keys"] == ["BLOCK_X", "BLOCK_Y", "FILTER_IN_CONST"]
    assert cache["tune_params"]["BLOCK_X"] == [8, 16, 32, 64]
    assert cache["cache"]["16,4,0"]["time"] == pytest.approx(0.020)
    assert cache["cache"]["64,4,0"]["time"] == "CompilationFailedConfig"
    assert len(cache["cache"]) == 5


def test_kernel_tuners_own_schemas_accept_the_files(exported: Path) -> None:
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner is not installed (extra: bench)")
    import jsonschema
    from kernel_tuner.file_utils import output_file_schema

    version, results_schema = output_file_schema("results")
    _, metadata_schema = output_file_schema("metadata")
    assert version == T4_VERSION
    jsonschema.validate(
        json.loads((exported / STUDY / "NVIDIA_H100_80GB_HBM3_T4.json").read_text()),
        results_schema,
    )
    meta = json.loads((exported / "NVIDIA_H100_80GB_HBM3_metadata_T4.json").read_text())
    jsonschema.validate(meta, metadata_schema)


def test_kernel_tuners_simulation_mode_runs_on_the_cache(exported: Path) -> None:
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner is not installed (extra: bench)")
    from kernel_tuner import tune_kernel

    path = exported / STUDY / "NVIDIA_H100_80GB_HBM3_cache.json"
    cache = json.loads(path.read_text())
    keys = cache["tune_params_keys"]

    def measured(p: dict) -> bool:  # a study holds part of its space
        return ",".join(str(p[k]) for k in keys) in cache["cache"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(
            FAMILY,
            "",
            (1,),
            [],
            cache["tune_params"],
            restrictions=[measured],
            strategy="brute_force",
            cache=str(path),
            simulation_mode=True,
            quiet=True,
        )
    times = [r["time"] for r in results if isinstance(r["time"], float)]
    assert len(results) == 5 and min(times) == pytest.approx(0.020)


def test_cli_t4_export_and_its_errors(exported: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    runner = CliRunner()
    done = runner.invoke(
        main,
        ["export", "--format", "t4", "--output", str(tmp_path / "o"), "--storage", str(db)],
    )
    assert done.exit_code == 0, done.output
    assert (tmp_path / "o" / STUDY / "NVIDIA_H100_80GB_HBM3_T4.json").is_file()
    none = runner.invoke(
        main,
        ["export", "--format", "t4", "--output", str(tmp_path / "o"), "--storage", str(db),
         "--shape", "N=8,K=3,C=1,F=1"],
    )  # fmt: skip
    assert none.exit_code == 1 and "no evaluations" in none.output
