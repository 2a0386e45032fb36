"""The early stop in timing: the rule, recorded H100 samples replayed, and the tuner's handling."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from autotune.families.direct_naive import DirectNaive
from autotune.gpu.early_stop import EarlyStop
from autotune.gpu.session import Job, TimingPolicy
from autotune.model.evaluator import Evaluator
from autotune.model.problem import ConvProblem
from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement, Status
from autotune.model.space import DeviceLimits
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner

SAMPLES = Path(__file__).parents[1] / "data" / "early_stop_samples.json.gz"


def test_rule() -> None:
    rule = EarlyStop(factor=4.0, after=3)
    assert not rule.stops([9.0, 9.0, 9.0], None)  # no best yet: the first candidate is timed
    assert not rule.stops([9.0, 9.0], 1.0)  # too few samples to judge
    assert rule.stops([9.0, 4.1, 9.0], 1.0)
    assert not rule.stops([9.0, 3.9, 9.0], 1.0)  # one fast sample is enough to go on
    assert rule.stops([9.0, 9.0, 9.0, 0.5], 1.0)  # decided on the first `after` samples only
    assert "fastest 4.1 ms > 4 x best 1 ms" in rule.reason([9.0, 4.1, 9.0], 1.0)


def _studies() -> dict[str, list[list[float]]]:
    return json.loads(gzip.decompress(SAMPLES.read_bytes()))["studies"]


def test_recorded_samples_never_stop_a_would_be_best() -> None:
    """Every OK evaluation stored on the H100 (rows: median, first five samples), replayed per
    study in stored order with the rule applied against the best median so far: a stopped
    candidate never had a median that would have been the best, and the rule does stop some."""
    rule = EarlyStop()
    stopped = kept = 0
    worst_ratio = 0.0
    for label, rows in _studies().items():
        best = None
        for median, *first in rows:
            if rule.stops(first, best):
                stopped += 1
                assert median > best, f"{label}: a would-be best ({median} < {best}) was stopped"
            else:
                kept += 1
            best = median if best is None else min(best, median)
            worst_ratio = max(worst_ratio, min(first[: rule.after]) / median)
    # TPE campaigns sample few far-off candidates; still, some 2% of them stop early.
    assert stopped >= 0.01 * (stopped + kept)
    assert worst_ratio < rule.factor  # the margin the rule's factor is chosen for


class _SampledEvaluator(Evaluator):
    """Times a config from a sample sequence, applying the job's early stop as the worker does."""

    def __init__(self, sequences):
        self.device = DeviceInfo(name="Synthetic GPU", compute_capability="9.0", sm_count=132)
        self.limits = DeviceLimits()
        self.protocol = TIMING_PROTOCOL
        self.sequences = sequences
        self.jobs: list[Job] = []

    def evaluate(self, job: Job, timeout_s: float) -> Measurement:
        self.jobs.append(job)
        samples = list(self.sequences(dict(job.plan.defines)))
        stop = job.check.timing.early_stop
        if stop is not None and stop.stops(samples, job.best_ms):
            taken = samples[: stop.after]
            return Measurement(
                Status.SLOW,
                time_ms=statistics.median(taken),
                samples_ms=tuple(taken),
                error=stop.reason(taken, job.best_ms),
            )
        return Measurement.from_samples(samples)

    def call(self, task, timeout_s):
        return self.evaluate(task, timeout_s)

    def close(self) -> None:
        pass


@pytest.mark.slow
def test_tuner_passes_best_and_never_makes_a_slow_candidate_best(tmp_path) -> None:
    from autotune.gpu.compiler import Compiler

    def sequences(d):
        fast = 1.0 + abs(d["BLOCK_X"] - 32) / 32 + abs(d["BLOCK_Y"] - 4)
        return [fast] * 12

    evaluator = _SampledEvaluator(sequences)
    store = Store(str(tmp_path / "t.db"))
    studies, _ = plan_studies([(DirectNaive(), ConvProblem(N=29, K=5, C=7, F=9))], DeviceLimits())
    tuner = Tuner(
        GpuRunner(Compiler(cache_dir=tmp_path / "cubins"), evaluator), store, strategy="brute_force"
    )
    outcome = tuner.run(studies, None)
    (study,) = outcome.studies
    searched, confirming = evaluator.jobs[: study.evaluated], evaluator.jobs[study.evaluated :]
    assert searched[0].best_ms is None
    bests = [j.best_ms for j in searched[1:]]
    assert all(b is not None for b in bests) and bests == sorted(bests, reverse=True)
    # The best measured twice more after the search: never stopped early against itself.
    assert len(confirming) == 2 and all(j.best_ms is None for j in confirming)
    history = store.evaluations(tuner.device_id, "direct_naive", studies[0].problem)
    statuses = {h.status for h in history}
    assert Status.SLOW in statuses and Status.OK in statuses
    slow = [h for h in history if h.status is Status.SLOW]
    assert all(h.time_ms is not None and h.gflops is None for h in slow)
    assert all("stopped after 3 samples" in h.error for h in slow)
    # The worker's samples are what the store keeps: three for a stopped candidate.
    frame = store.history(family="direct_naive")
    for status, samples in zip(frame["status"], frame["samples_ms"], strict=True):
        taken = json.loads(samples) if isinstance(samples, str) else list(samples)
        assert len(taken) == (3 if status == "SLOW" else 12)
    best_time = min(h.time_ms for h in history if h.status is Status.OK)
    assert study.best[1].status is Status.OK and study.best[1].time_ms == best_time
    assert all(h.time_ms > 4 * best_time for h in slow)
    assert study.failures == 0  # slower is not failed
    # Resumed, the stored SLOW rows are history like any other: nothing is evaluated again.
    again = Tuner(
        GpuRunner(Compiler(cache_dir=tmp_path / "cubins"), evaluator), store, strategy="tpe"
    )
    assert again.run(studies, None).evaluated == 0


def test_policy_without_early_stop_times_everything() -> None:
    assert TimingPolicy().early_stop == EarlyStop()
    assert TimingPolicy(early_stop=None).early_stop is None


@pytest.mark.parametrize("status", list(Status))
def test_only_ok_and_slow_are_timed(status: Status) -> None:
    assert status.timed == (status in (Status.OK, Status.SLOW))
