"""The tuning loop: ask -> compile -> evaluate -> record -> tell, with budgets, resume and dedup."""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

from autotune.families import Family
from autotune.gpu.timing import TimingPolicy
from autotune.model.records import Measurement, Status
from autotune.model.runner import Runner
from autotune.model.space import Config
from autotune.store import Store
from autotune.strategies import DEFAULT_STRATEGY, make_strategy
from autotune.strategies.brute_force import GivenConfigs
from autotune.tuning.claims import StudyClaims, Unclaimed
from autotune.tuning.pipeline import compile_jobs, next_ready
from autotune.tuning.studies import (
    CampaignOutcome,
    Progress,
    Skipped,
    Study,
    StudyOutcome,
    estimated_cost_s,
    study_target,
    valid_count,
)
from autotune.tuning.warmstart import warm_start

TAKEN_OVER = "taken over by another run"  # a study's claim ran out: another run tunes it now
# After its search a study's top configuration is measured again until it stands on this many
# measurements (its figure is their median: store/repeats.py) ...
CONFIRMED_MEASUREMENTS = 3
# ... for this many configurations at most: a lucky first time confirmed slower hands the top
# to another, measured once, which is confirmed in turn. With two, 2 of 130 H200 studies ended
# on a best measured once (results/h200/20261202e); each round costs two measurements.
CONFIRM_ROUNDS = 3


def register_device(store: Store, runner: Runner) -> int:
    """The device's id in the store, inserting it the first time it is seen. The worker
    describes the GPU; the compiler that builds the cubins is known here."""
    device = dataclasses.replace(runner.device, nvrtc_version=runner.compiler_version)
    return store.register_device(device)


class Tuner:
    """Runs studies against one runner and one store. Budgets count stored evaluations of a
    study (earlier runs included), so running the same command again resumes, never repeats.
    After a study's search (unless told not to) its best is measured again (_confirm): those
    repeats are not evaluations and spend no budget. Built by the session setup
    (tuning/session.py) for every caller."""

    def __init__(
        self,
        runner: Runner,
        store: Store,
        *,
        strategy: str = DEFAULT_STRATEGY,
        seed: int = 0,
        timing: TimingPolicy | None = None,
        command: str = "",
        versions: dict[str, str] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        jobs: int | None = None,
        device_id: int | None = None,
        claim_studies: bool = True,
        confirm_best: bool = True,
    ) -> None:
        self.runner = runner
        self.store = store
        self.strategy = strategy
        self.seed = seed
        self.timing = timing or TimingPolicy()
        self.on_progress = on_progress or (lambda p: None)
        # A caller that opened the GPU has registered the device already (the CLI, for its
        # ceilings and baselines) and passes its id: one registration per run.
        self.device_id = register_device(store, runner) if device_id is None else device_id
        self.run_id = store.start_run(self.device_id, command, versions or {})
        self._digests: dict[str, str] = {}  # family -> the digest its evaluations are stored with
        # A runner that answers in order (a replay) gets one config in flight at a time.
        self.jobs = 1 if runner.in_order else compile_jobs(jobs)
        self.gpu_busy_s = 0.0
        self._pool: ThreadPoolExecutor | None = None
        self._held = False  # inside hold(): pools and run stay open between run() calls
        # Other runs on the same store tune other studies meanwhile, never the same one; no
        # claims where a scheduler hands out the studies (Ray: a retry waits out no lease).
        self.claims = (
            StudyClaims(store, self.device_id, self.run_id) if claim_studies else Unclaimed()
        )
        # A replay answers a configuration with its recording again: nothing to confirm.
        self.confirm_best = confirm_best and runner.remeasures

    # -- campaign ------------------------------------------------------------------------------

    def plan(self, studies: list[Study], budget: int | None) -> list[tuple[Study, int, int, float]]:
        """(study, target, evaluations to go, estimated GPU seconds), longest first (LPT): the
        campaign ends with its last study, so only small ones are left to even out the end (on
        two H200s the largest came last before, and one GPU idled through it). Shared by `run
        --gpus` workers and the `run --ray` driver."""
        planned = []
        for study in studies:
            history, _ = self._history(study)
            target = study_target(budget, study, history)
            remaining = max(0, target - valid_count(history, study.space))
            cost = estimated_cost_s(study.problem.flops, remaining, self.timing)
            planned.append((study, target, remaining, cost))
        return sorted(planned, key=lambda p: -p[3])

    @contextmanager
    def hold(self) -> Iterator[Tuner]:
        """Keep the compile pools and the run open across run() calls (a Ray actor's)."""
        self._start_pools()
        self._held = True
        try:
            yield self
        finally:
            self._held = False
            self._stop_pools()
            self.store.finish_run(self.run_id)

    def _start_pools(self) -> None:
        self._pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="autotune-compile")
        self.runner.start(self.jobs)

    def _stop_pools(self) -> None:
        self.runner.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def run(
        self,
        studies: list[Study],
        budget: int | None,
        time_limit_s: float | None = None,
        skipped: list[Skipped] | None = None,
    ) -> CampaignOutcome:
        outcome = CampaignOutcome(skipped=list(skipped or []))
        start = time.monotonic()
        deadline = start + time_limit_s if time_limit_s else None
        planned = self.plan(studies, budget)
        targets = {id(study): target for study, target, _, _ in planned}
        counters = {"done": 0, "planned": sum(p[2] for p in planned), "start": start}
        if not self._held:
            self._start_pools()
        busy_before = self.gpu_busy_s
        try:
            for study in self.claims.each([p[0] for p in planned], deadline):
                result = StudyOutcome(study)
                outcome.studies.append(result)
                # Read again now that it is ours: another run may have tuned it since the start.
                history, result.predates = self._history(study)
                self._tune(study, history, targets[id(study)], deadline, result, counters)
                if result.stopped == "time limit":
                    break
            if deadline is not None:  # a study with evaluations to go that did not end: the
                # time limit stopped it, or came while the run waited for another's claim
                ended = {id(s.study) for s in outcome.studies if s.stopped != "time limit"}
                outcome.short = sum(1 for p in planned if p[2] and id(p[0]) not in ended)
        except KeyboardInterrupt:
            outcome.interrupted = True
        finally:
            outcome.elapsed_s = time.monotonic() - start
            outcome.gpu_busy_s = self.gpu_busy_s - busy_before
            if "compile_start" in counters:
                outcome.compile_wall_s = time.monotonic() - counters["compile_start"]
            self.claims.release_all()
            if not self._held:
                self._stop_pools()
                self.store.finish_run(self.run_id)
        return outcome

    # -- one study -----------------------------------------------------------------------------

    def _digest(self, family: Family) -> str:
        """The digest of the family's code as this run builds it, read once per run."""
        if family.name not in self._digests:
            self._digests[family.name] = self.runner.kernel_digest(family)
        return self._digests[family.name]

    def _history(self, study: Study) -> tuple[list, tuple[str, ...]]:
        """The study's stored evaluations of the current code (those of other code are measured
        again), configs stored before a later tunable completed; and the later tunables they
        all predate."""
        stored = self.store.evaluations(
            self.device_id,
            study.family.name,
            study.problem,
            self.runner.protocol,
            kernel_digest=self._digest(study.family),
        )
        family = study.family
        completed = [dataclasses.replace(h, config=family.complete(h.config)) for h in stored]
        return completed, family.predated(h.config for h in stored)

    def _tune(self, study, history, target, deadline, result: StudyOutcome, counters) -> None:
        if study.configs is not None:
            strategy = GivenConfigs(list(study.configs))
        else:
            strategy = make_strategy(self.strategy, study.space, self.seed)
            if hasattr(strategy, "new_parameters"):  # the surrogate's: see its docstring
                strategy.new_parameters(study.family.later_tunables)
            # Transfer: start at the stored best configs of this family's nearest other shapes.
            strategy = warm_start(
                strategy,
                self.store,
                self.runner.device.name,
                study,
                self.runner.protocol,
                kernel_digest=self._digest(study.family),
            )
        seen: set[Config] = set()
        for h in history:
            if h.config in seen or not study.space.is_valid(h.config):
                continue  # the space changed since: that point no longer belongs to it
            seen.add(h.config)
            # A candidate stopped early as slower has a (pessimistic) time: the strategy learns it.
            strategy.tell(h.config, study.told(h.config, h))
            result.stored += 1
            result.failures += not h.status.timed
            if h.status is Status.OK and (
                result.best is None or h.time_ms < result.best[1].time_ms
            ):
                result.best = (h.config, Measurement(Status.OK, time_ms=h.time_ms))
        self._emit(study, "start", result, target, counters)
        # Prepare ahead: keep up to `jobs` asked configs compiling (the runner's NVRTC processes
        # or these threads) while the GPU evaluates whichever is ready.
        pending: deque[tuple[Config, Future]] = deque()
        try:
            while True:
                timed_out = deadline is not None and time.monotonic() >= deadline
                while (
                    not timed_out
                    and not result.stopped
                    and len(pending) < self.jobs
                    and result.stored + len(pending) < target
                ):
                    config = strategy.ask()
                    if config is None:
                        result.stopped = "space exhausted"
                        break
                    if config in seen:  # a strategy must not repeat itself; the tuner makes sure
                        continue
                    seen.add(config)
                    counters.setdefault("compile_start", time.monotonic())
                    prepare = self.runner.prepare
                    pending.append((config, self._pool.submit(prepare, study, config)))
                if timed_out:
                    result.stopped = "time limit"
                if not pending or timed_out:
                    break
                config, future = next_ready(pending)  # whichever finished compiling first
                best_ms = result.best[1].time_ms if result.best else None
                m = self._measure(study, config, future.result(), best_ms)
                self.store.record(
                    self.run_id,
                    self.device_id,
                    study.family.name,
                    study.problem,
                    config,
                    m,
                    study.problem.flops,
                    kernel_digest=self._digest(study.family),
                )
                strategy.tell(config, study.told(config, m))
                result.stored += 1
                result.evaluated += 1
                counters["done"] += 1
                if not m.status.timed:
                    result.failures += 1
                elif m.status is Status.OK and (
                    result.best is None or m.time_ms < result.best[1].time_ms
                ):
                    result.best = (config, m)  # a candidate stopped early (SLOW) never is
                self._emit(study, "eval", result, target, counters, m, config)
                if not self.claims.renew((study.family.name, study.problem.key)):
                    result.stopped = TAKEN_OVER  # its lease ran out meanwhile
                    break
        finally:
            for _, future in pending:
                future.cancel()  # unevaluated configs are simply asked again next time
        if result.stopped == "space exhausted" and result.stored >= target:
            result.stopped = ""
        if self.confirm_best and result.stopped != TAKEN_OVER:
            self._confirm(study, result, target, counters)
        self._emit(study, "end", result, target, counters)

    def _confirm(self, study: Study, result: StudyOutcome, target: int, counters) -> None:
        """Measure the study's top configuration (by figure, as the store ranks it) again,
        through the same check and timer as any evaluation, until it stands on
        CONFIRMED_MEASUREMENTS, each stored as a repeat; CONFIRM_ROUNDS configurations at
        most. Then the outcome's best is the store's top; where the rounds ran out before it
        stood on enough measurements, the outcome says so (the study's next run confirms it). A
        measurement that fails is not a time: nothing is stored, the configuration keeps its
        figure, and the outcome says why it stands unconfirmed (this run confirms nothing more
        of the study)."""
        for _ in range(CONFIRM_ROUNDS):
            top = self._top(study)
            if top is None or top.measurements >= CONFIRMED_MEASUREMENTS:
                break
            config = study.family.complete(top.config)
            if not study.space.is_valid(config):
                result.unconfirmed = "it is no longer in the family's space"
                self._emit(study, "unconfirmed", result, target, counters, config=config)
                break
            if not self.claims.renew((study.family.name, study.problem.key)):
                result.stopped = TAKEN_OVER
                return
            self._emit(study, "confirm", result, target, counters, config=config)
            prepared = self.runner.prepare(study, config)
            failed = None
            for _ in range(CONFIRMED_MEASUREMENTS - top.measurements):
                m = self._measure(study, config, prepared, None)
                if m.status is not Status.OK:
                    failed = m
                    break
                self.store.add_repeats(top.evaluation_id, self.run_id, [m])
            if failed is not None:
                lines = failed.error.strip().splitlines()
                said = f": {lines[0]}" if lines else ""
                result.unconfirmed = f"measured again, it gave {failed.status.value}{said}"
                self._emit(study, "unconfirmed", result, target, counters, failed, config)
                break
        top = self._top(study)
        if top is None:
            return
        # Below CONFIRMED_MEASUREMENTS with nothing said yet: the rounds ran out.
        if top.measurements < CONFIRMED_MEASUREMENTS and not result.unconfirmed:
            result.unconfirmed = (
                f"{CONFIRM_ROUNDS} configurations in turn measured slower again than at "
                f"first; the one now on top stands on {top.measurements} "
                f"measurement{'' if top.measurements == 1 else 's'}, not "
                f"{CONFIRMED_MEASUREMENTS} (the study's next run confirms it)"
            )
            config = study.family.complete(top.config)
            self._emit(study, "unconfirmed", result, target, counters, config=config)
        result.best = (top.config, Measurement(Status.OK, time_ms=top.time_ms))

    def _top(self, study: Study):
        """The study's top configuration by figure, as the store ranks it (store.study_best)."""
        return self.store.study_best(
            self.device_id,
            study.family.name,
            study.problem,
            self.runner.protocol,
            self._digest(study.family),
        )

    def _emit(self, study, event, result, target, counters, m=None, config=None) -> None:
        elapsed = time.monotonic() - counters["start"]
        done = counters["done"]
        eta = elapsed / done * (counters["planned"] - done) if done else None
        best = result.best[1].gflops(study.problem.flops) if result.best else None
        self.on_progress(
            Progress(
                study.label,
                event,
                result.stored,
                target,
                result.failures,
                best,
                done,
                counters["planned"],
                elapsed,
                eta,
                m,
                config,
                result.unconfirmed,
            )
        )

    # -- one configuration ---------------------------------------------------------------------

    def evaluate(self, study: Study, config: Config, prepared=None) -> Measurement:
        """Prepare (unless `prepared` is the runner's preparation of it) and measure one
        configuration. Never raises for a failing configuration: every outcome becomes a
        Measurement with its status."""
        prepared = self.runner.prepare(study, config) if prepared is None else prepared
        return self._measure(study, config, prepared, None)

    def _measure(self, study: Study, config: Config, prepared, best_ms: float | None):
        busy_from = time.monotonic()
        try:
            return self.runner.measure(
                study, config, prepared, best_ms=best_ms, timing=self.timing, seed=self.seed
            )
        finally:
            self.gpu_busy_s += time.monotonic() - busy_from


__all__ = ["Tuner", "register_device"]
