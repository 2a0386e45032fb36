"""`autotune bench scaling` on CPU: its commands, its figures and files (campaigns faked), and its
input errors."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner

from autotune.bench import scaling
from autotune.cli.app import main
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import Config
from autotune.store import Store


def _fake_campaign(calls):
    """Stands in for `autotune run`: records 4 studies x 3 evaluations, faster on more GPUs."""

    def run(argv, log, env=None):
        calls.append((argv, env))
        storage = argv[argv.index("--storage") + 1]
        gpus = len(argv[argv.index("--gpus") + 1].split(",")) if "--gpus" in argv else 1
        if "--ray" in argv:
            gpus = len(env["CUDA_VISIBLE_DEVICES"].split(","))
        with Store(storage) as store:
            device_id = store.register_device(DeviceInfo("Fake GPU", "9.0", 132))
            run_id = store.start_run(device_id, "fake", {})
            for n in range(9, 13):
                for bx in (8, 16, 32):
                    config = Config.of({"BLOCK_X": bx})
                    m = Measurement.from_samples([1.0])
                    store.record(
                        run_id, device_id, "f", ConvProblem(N=n, K=3, C=1, F=1), config, m, 1
                    )
        log.write_text("done\n")
        return 100.0 / gpus + 2.0 + ("--ray" in argv), 0

    return run


def test_scaling_runs_one_then_several_gpus_and_writes_the_ratio(tmp_path, monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(scaling, "_run_campaign", _fake_campaign(calls))
    out = tmp_path / "bench"
    args = ["bench", "scaling", "--gpus", "0,1", "--budget", "3", "--output-dir", str(out)]
    args.append("--quick-timing")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    (one, env1), (two, env2) = calls
    assert env1 is None and env2 is None
    assert one[:2] == ["run", "--family"] and "--no-baseline" in one and "--quick-timing" in one
    assert one[one.index("--gpu") + 1] == "0" and "--gpus" not in one
    assert two[two.index("--gpus") + 1] == "0,1" and "--gpu" not in two
    assert one[one.index("--storage") + 1] != two[two.index("--storage") + 1]  # fresh each
    assert one[one.index("--cache-dir") + 1] != two[two.index("--cache-dir") + 1]  # cold each
    figures = json.loads((out / "scaling.json").read_text())
    assert [r["wall_s"] for r in figures["runs"]] == [102.0, 52.0]
    assert figures["ratio"] == round(52 / 102, 3) and figures["target_ratio"] == 0.55
    assert [r["evaluations"] for r in figures["runs"]] == [12, 12]
    assert [r["studies"] for r in figures["runs"]] == [4, 4]
    md = (out / "scaling.md").read_text()
    assert "meets the target" in md and "| 2 | gpus | 52.0 | 0.51 | 0.0 | 52.0 | 12 | 4 | 0 |" in md
    assert "ratio 0.51" in result.output
    assert (out / "scaling_1gpu.log").read_text() == "done\n"
    assert (out / "scaling_2gpu.log").exists()


def test_with_ray_the_same_gpus_run_a_third_campaign_on_ray(tmp_path, monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(scaling, "_run_campaign", _fake_campaign(calls))
    monkeypatch.setattr(scaling.importlib.util, "find_spec", lambda name: object())
    out = tmp_path / "bench"
    args = ["bench", "scaling", "--gpus", "0,2", "--budget", "3", "--ray", "--output-dir", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    (one, _), (two, _), (three, env) = calls
    assert "--gpus" in two and "--ray" not in two
    assert three[three.index("--ray") + 1] == "local" and "--gpus" not in three
    assert "--gpu" not in three and env == {"CUDA_VISIBLE_DEVICES": "0,2"}
    assert len({argv[argv.index("--storage") + 1] for argv, _ in calls}) == 3  # fresh each
    figures = json.loads((out / "scaling.json").read_text())
    assert [(r["runner"], r["wall_s"]) for r in figures["runs"]] == [
        ("gpu", 102.0), ("gpus", 52.0), ("ray", 53.0)
    ]  # fmt: skip
    assert figures["ray_ratio"] == round(53 / 102, 3)
    assert figures["ray_vs_gpus"] == round(53 / 52, 3)
    md = (out / "scaling.md").read_text()
    assert "| 2 | ray | 53.0 | 0.52 | 0.0 | 53.0 | 12 | 4 | 0 |" in md
    assert "`--ray` / `--gpus`: **1.019** (meets the target of at most 1.1)" in md
    assert "CUDA_VISIBLE_DEVICES=0,2 autotune run" in md
    assert (out / "scaling_2gpu-ray.log").exists()
    assert "--ray 53.0 s" in result.output


def test_reuse_takes_the_earlier_runs_and_measures_only_ray(tmp_path, monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(scaling, "_run_campaign", _fake_campaign(calls))
    monkeypatch.setattr(scaling.importlib.util, "find_spec", lambda name: object())
    out = tmp_path / "bench"
    args = ["bench", "scaling", "--gpus", "0,1", "--budget", "3", "--output-dir", str(out)]
    assert CliRunner().invoke(main, args).exit_code == 0
    earlier = tmp_path / "earlier.json"
    earlier.write_text((out / "scaling.json").read_text())
    calls.clear()
    result = CliRunner().invoke(main, [*args, "--ray", "--reuse", str(earlier)])
    assert result.exit_code == 0, result.output
    assert [argv[argv.index("--ray") + 1] for argv, _ in calls] == ["local"]  # only Ray ran
    figures = json.loads((out / "scaling.json").read_text())
    assert [(r["runner"], r["wall_s"]) for r in figures["runs"]] == [
        ("gpu", 102.0), ("gpus", 52.0), ("ray", 53.0)
    ]  # fmt: skip
    assert figures["reused"]["runs"] == ["gpu", "gpus"]
    assert "reused from" in (out / "scaling.md").read_text()
    budget_4 = [a if a != "3" else "4" for a in args]  # the same campaign at another budget
    other = CliRunner().invoke(main, [*budget_4, "--reuse", str(earlier)])
    assert other.exit_code == 2 and "another campaign: budget 3, not 4" in other.output
    # A file of an older autotune, which recorded fewer settings: say so, not "another campaign".
    older = json.loads(earlier.read_text())
    del older["campaign"]["strategy"], older["campaign"]["gpus"]
    earlier.write_text(json.dumps(older))
    old = CliRunner().invoke(main, [*args, "--ray", "--reuse", str(earlier)])
    assert old.exit_code == 2, old.output
    assert "does not record the campaign's strategy, gpus: measure it again" in old.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    wrong = CliRunner().invoke(main, [*args, "--reuse", str(bad)])
    assert wrong.exit_code == 2 and "not a scaling.json" in wrong.output


def test_a_failed_campaign_is_an_error_with_its_log(tmp_path, monkeypatch) -> None:
    def failing(argv, log, env=None):
        log.write_text("no usable CUDA GPU\n")
        return 1.0, 1

    monkeypatch.setattr(scaling, "_run_campaign", failing)
    args = ["bench", "scaling", "--gpus", "0,1", "--output-dir", str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "1 GPU campaign (gpu) failed" in result.output
    assert "no usable CUDA GPU" in result.output and not (tmp_path / "scaling.json").exists()


def test_scaling_input_errors() -> None:
    for gpus, message in (("0", "at least 2 GPUs"), ("0,a", "expected 'all'"), ("1,1", "twice")):
        result = CliRunner().invoke(main, ["bench", "scaling", "--gpus", gpus])
        assert result.exit_code == 2 and message in result.output, result.output
    assert CliRunner().invoke(main, ["bench", "scaling"]).exit_code == 2  # --gpus is required


def test_stopped_slow_candidates_are_not_counted_as_failures(tmp_path) -> None:
    from autotune.model.records import Status

    storage = str(tmp_path / "s.db")
    with Store(storage) as store:
        device_id = store.register_device(DeviceInfo("Fake GPU", "9.0", 132))
        run_id = store.start_run(device_id, "fake", {})
        outcomes = {
            8: Measurement.from_samples([1.0]),
            16: Measurement(Status.SLOW, time_ms=9.0, samples_ms=(9.0, 9.1, 9.2)),
            32: Measurement(Status.WRONG_RESULT, error="wrong"),
        }
        for bx, m in outcomes.items():
            problem = ConvProblem(N=9, K=3, C=1, F=1)
            store.record(run_id, device_id, "f", problem, Config.of({"BLOCK_X": bx}), m, 1)
            time.sleep(0.3)  # stored 0.3 s apart: the tuning time spans the first to the last
    evaluations, studies, failures, tuning_s = scaling._stored(storage)
    assert (evaluations, studies, failures) == (3, 1, 1)
    assert 0.5 <= tuning_s < 5
