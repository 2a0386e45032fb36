"""What a bare `autotune run` plans (the quick campaign), its estimate and ETA, and --campaign:
on the synthetic GPU, the tuner's loop replaced by a recorder (no compiling)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import autotune.cli.run as run_module
import autotune.gpu.evaluator
import autotune.tuning.campaign as campaign_module
from autotune.cli.app import main
from autotune.cli.estimate import Eta, estimate_run
from autotune.gpu.timing import TimingPolicy
from autotune.model.campaigns import FULL, QUICK, named_campaign
from autotune.model.space import DeviceLimits
from autotune.tuning.campaign import RunRequest, pair_request
from autotune.tuning.studies import CampaignOutcome, Progress, estimated_cost_s, plan_studies
from autotune.tuning.tuner import Tuner
from tests.conftest import SyntheticEvaluator

H100_JOBS = 16  # compile processes on the lent H100 machine (one per core)
THREE_MINUTES_S = 180.0
START_S = 15.0  # the process, CuPy and the GPU worker before the estimate line: left out of it


@pytest.fixture
def recorded(monkeypatch):
    """The synthetic GPU, ceilings and baselines left out, and the tuner's loop recording what
    it was asked instead of compiling and evaluating."""
    monkeypatch.setattr(
        autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: SyntheticEvaluator(lambda d: 1.0)
    )
    monkeypatch.setattr(campaign_module.Campaign, "measure_libraries", lambda *args, **kwargs: None)
    asked = []

    def run(self, studies, budget, time_limit_s=None, skipped=None):
        asked.append((studies, budget))
        return CampaignOutcome()

    monkeypatch.setattr(Tuner, "run", run)
    return asked


def _quick_plan(budget: int = 12):
    pairs = pair_request(RunRequest(campaign=QUICK)).pairs
    studies, skipped = plan_studies(pairs, DeviceLimits())
    assert not skipped
    return [(s, budget, min(budget, len(s.space)), 0.0) for s in studies]


def test_a_bare_run_plans_the_quick_campaign_and_says_what_comes_next(recorded, tmp_path):
    db = str(tmp_path / "r.db")
    result = CliRunner().invoke(main, ["run", "--storage", db, "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    ((studies, budget),) = recorded
    assert budget == 12
    families = {s.family.name for s in studies}
    assert families == set(named_campaign(QUICK).families)
    assert len(studies) == 9
    assert sum(getattr(s.problem, "dtype", "fp32") != "fp32" for s in studies) == 1  # one TC study
    assert "9 studies (campaign quick)" in result.stderr
    assert "108 evaluations to run, about " in result.stderr
    assert f"autotune best --storage {db}" in result.stderr
    assert "autotune run --campaign full" in result.stderr


def test_a_run_of_one_study_says_so_in_the_singular(recorded, tmp_path):
    args = ["run", "--family", "chen_general", "--shape", "N=256,K=7,C=256,F=256"]
    result = CliRunner().invoke(main, [*args, "--storage", str(tmp_path / "r.db")])
    assert result.exit_code == 0, result.output
    assert "; 1 study, strategy " in result.stderr


def test_the_quick_campaign_is_estimated_within_three_minutes_on_the_h100():
    # A fresh database: every ceiling to measure, cuDNN on each 2D convolution shape.
    plan = _quick_plan()
    conv2d = {s.problem for s, *_ in plan if s.problem.kind == "conv2d"}
    estimate = estimate_run(plan, H100_JOBS, TimingPolicy(), True, len(conv2d), confirm=True)
    assert estimate.evaluations == 108
    assert len(conv2d) == 8
    assert 60 < estimate.total_s < THREE_MINUTES_S - START_S
    # On the two cores of a developer's machine compiling costs more, and the estimate says so.
    slow = estimate_run(plan, 2, TimingPolicy(), True, len(conv2d))
    assert slow.tuning_s > estimate.tuning_s


def test_the_estimate_line_is_the_run_estimate(recorded, tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: H100_JOBS)
    result = CliRunner().invoke(
        main, ["run", "--storage", str(tmp_path / "r.db"), "--cache-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    plan = _quick_plan()
    # The run confirms each study's best after its search: the estimate counts it.
    estimate = estimate_run(plan, H100_JOBS, TimingPolicy(), True, 8, confirm=True)
    said = re.search(r"about (\d+)m(\d\d)s on an H100", result.stderr)
    assert said, result.stderr
    assert int(said[1]) * 60 + int(said[2]) == int(estimate.total_s)
    assert "tuning and measuring each best again" in result.stderr


def test_a_best_measured_again_is_in_the_estimate_and_the_eta():
    plan = _quick_plan()
    plain = estimate_run(plan, H100_JOBS, TimingPolicy(), False, 0)
    confirmed = estimate_run(plan, H100_JOBS, TimingPolicy(), False, 0, confirm=True)
    for (study, *_), without, cost in zip(plan, plain.studies, confirmed.studies, strict=True):
        # Two more measurements of the best: their GPU time alone (its kernel is compiled).
        gpu_s = estimated_cost_s(study.problem.flops, 1, TimingPolicy())
        assert cost.confirm_s == pytest.approx(2 * gpu_s) and without.confirm_s == 0
        assert cost.total_s == pytest.approx(without.total_s + cost.confirm_s)
    # A study done in an earlier run is read back, not measured again.
    done = [(study, target, 0, c) for study, target, _, c in plan]
    assert estimate_run(done, H100_JOBS, TimingPolicy(), False, 0, confirm=True).tuning_s == 0
    # The ETA counts the confirmation done when the study ends.
    first = confirmed.studies[0]
    eta = Eta(confirmed)
    for _ in range(first.evaluations):
        eta(_progress(first.label, "eval", 1.0))
    searched = eta.done_s
    assert searched == pytest.approx(first.total_s - first.confirm_s)
    eta(_progress(first.label, "end", 1.0))
    assert eta.done_s == pytest.approx(first.total_s)


def _progress(study: str, event: str, elapsed_s: float) -> Progress:
    return Progress(study, event, 0, 12, 0, None, 0, 108, elapsed_s, None)


def test_the_eta_starts_at_the_estimate_and_follows_the_measured_pace():
    plan = _quick_plan()
    estimate = estimate_run(plan, H100_JOBS, TimingPolicy(), False, 0)
    first = estimate.studies[0]
    eta = Eta(estimate)
    assert eta(_progress(first.label, "start", 0.0)).eta_s == pytest.approx(estimate.tuning_s)
    # Every evaluation of the first study twice as slow as estimated: the ETA moves toward
    # twice the estimate of what is left, never past it.
    spent = 0.0
    for index in range(first.evaluations):
        spent += 2 * (first.per_evaluation_s + (0.5 + first.first_s if index == 0 else 0))
        line = eta(_progress(first.label, "eval", spent))
    left = estimate.tuning_s - first.total_s
    assert left < line.eta_s < 2 * left


@pytest.mark.parametrize(
    "args, message",
    [
        (["--campaign", "quick", "--family", "maxdnn"], "--campaign names its families"),
        (["--campaign", "full", "--shapes", "alexnet"], "--campaign names its families"),
        (["--campaign", "quick", "--dtype", "bf16"], "--dtype and --layout go with"),
        (["--campaign", "everything"], "Invalid value for '--campaign'"),
    ],
)
def test_campaign_with_what_it_names_itself_is_refused(args, message, tmp_path):
    result = CliRunner().invoke(main, ["run", *args, "--storage", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    "args, campaign",
    [
        ([], QUICK),
        (["--campaign", FULL], FULL),
        (["--campaign", FULL, "--dtype", "bf16"], FULL),
        (["--family", "maxdnn"], None),
        (["--shapes", "alexnet"], None),
        (["--dtype", "bf16"], None),
    ],
)
def test_which_campaign_a_command_line_runs(args, campaign, monkeypatch):
    asked = []

    def capture(request, on_progress=None):  # noqa: ARG001
        asked.append(request)
        raise SystemExit(0)

    monkeypatch.setattr(run_module, "tune", capture)
    result = CliRunner().invoke(main, ["run", *args])
    assert result.exit_code == 0, result.output
    assert asked[0].campaign == campaign


def test_the_full_campaign_is_every_family_on_its_own_set():
    full = pair_request(RunRequest(campaign=FULL)).pairs
    assert [(f.name, p.key) for f, p in full] == [
        (f.name, p.key) for f, p in pair_request(RunRequest()).pairs
    ]
    studies, _ = plan_studies(full, DeviceLimits())
    assert len(studies) > 100  # the 165 studies of the issue, as the H100's limits bind them
