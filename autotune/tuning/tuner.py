"""The tuning loop: ask -> compile -> evaluate -> record -> tell, with budgets, resume and dedup."""

from __future__ import annotations

import dataclasses
import os
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

from autotune.families import Family
from autotune.families.plan import KernelPlan
from autotune.gpu.compiler import CompileError, Compiler
from autotune.gpu.session import Check, Job, TimingPolicy
from autotune.model.evaluator import Evaluator
from autotune.model.problem import Problem
from autotune.model.records import Measurement, Status
from autotune.model.space import Config
from autotune.store import Store
from autotune.strategies import DEFAULT_STRATEGY, make_strategy
from autotune.strategies.brute_force import GivenConfigs
from autotune.tuning.claims import StudyClaims, Unclaimed
from autotune.tuning.pipeline import next_ready
from autotune.tuning.studies import (
    CampaignOutcome,
    Progress,
    Skipped,
    Study,
    StudyOutcome,
    estimated_cost_s,
    job_timeout_s,
    plan_studies,
    resource_problem,
    study_target,
    valid_count,
)
from autotune.tuning.warmstart import warm_start


def register_device(store: Store, evaluator: Evaluator, compiler: Compiler) -> int:
    """The device's id in the store, inserting it the first time it is seen. The worker
    describes the GPU; the compiler that builds the cubins is known here."""
    device = dataclasses.replace(evaluator.device, nvrtc_version=compiler.version)
    return store.register_device(device)


class Tuner:
    """Runs studies against one evaluator and one store. Budgets count stored evaluations of a
    study (earlier runs included), so running the same command again resumes, never repeats."""

    def __init__(
        self,
        compiler: Compiler,
        evaluator: Evaluator,
        store: Store,
        *,
        strategy: str = DEFAULT_STRATEGY,
        seed: int = 0,
        timing: TimingPolicy | None = None,
        command: str = "",
        versions: dict[str, str] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        jobs: int | None = None,
        compile_processes: bool = False,
        device_id: int | None = None,
        claim_studies: bool = True,
    ) -> None:
        self.compiler = compiler
        self.evaluator = evaluator
        self.store = store
        self.strategy = strategy
        self.seed = seed
        self.timing = timing or TimingPolicy()
        self.on_progress = on_progress or (lambda p: None)
        # A caller that opened the GPU has registered the device already (the CLI, for its
        # ceilings and baselines) and passes its id: one registration per run.
        self.device_id = (
            register_device(store, evaluator, compiler) if device_id is None else device_id
        )
        self.run_id = store.start_run(self.device_id, command, versions or {})
        self._references: dict[KernelPlan, tuple] = {}
        self._digests: dict[str, str] = {}  # family -> the digest its evaluations are stored with
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        if evaluator.replays:
            # A recording answers at once: one config in flight keeps every tell in ask order,
            # so the seed alone decides a replayed search.
            self.jobs = 1
        # NVRTC compiles one program at a time per process: real parallelism needs processes
        # (the CLI asks for them; tests of the loop keep threads, which need no start-up).
        self.compile_processes = compile_processes
        self.gpu_busy_s = 0.0
        self._pool: ThreadPoolExecutor | None = None
        self._held = False  # inside hold(): pools and run stay open between run() calls
        # Other runs on the same store tune other studies meanwhile, never the same one; no
        # claims where a scheduler hands out the studies (Ray: a retry waits out no lease).
        self.claims = (
            StudyClaims(store, self.device_id, self.run_id) if claim_studies else Unclaimed()
        )

    # -- campaign ------------------------------------------------------------------------------

    def plan(self, studies: list[Study], budget: int | None) -> list[tuple[Study, int, int, float]]:
        """(study, target, evaluations to go, estimated GPU seconds), longest first (LPT): the
        campaign ends with its last study, so only small ones are left to even out the end (on
        two H200s the largest came last before, and one GPU idled through it). Shared by `run
        --gpus` workers and the `run --ray` driver."""
        planned = []
        for study in studies:
            history = self._history(study)
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
        if self.compile_processes:
            self.compiler.start_pool(self.jobs)

    def _stop_pools(self) -> None:
        if self.compile_processes:
            self.compiler.stop_pool()
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
                history = self._history(study)
                self._tune(study, history, targets[id(study)], deadline, result, counters)
                if result.stopped == "time limit":
                    break
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
            self._digests[family.name] = self.compiler.kernel_digest(family)
        return self._digests[family.name]

    def _history(self, study: Study) -> list:
        """The study's stored evaluations of the current code (those of other code are measured
        again), configs stored before a later tunable completed."""
        stored = self.store.evaluations(
            self.device_id,
            study.family.name,
            study.problem,
            self.evaluator.protocol,
            kernel_digest=self._digest(study.family),
        )
        return [dataclasses.replace(h, config=study.family.complete(h.config)) for h in stored]

    def _tune(self, study, history, target, deadline, result: StudyOutcome, counters) -> None:
        if study.configs is not None:
            strategy = GivenConfigs(list(study.configs))
        else:
            strategy = make_strategy(self.strategy, study.space, self.seed)
            # Transfer: start at the stored best configs of this family's nearest other shapes.
            strategy = warm_start(
                strategy,
                self.store,
                self.evaluator.device.name,
                study,
                self.evaluator.protocol,
                kernel_digest=self._digest(study.family),
            )
        seen: set[Config] = set()
        for h in history:
            if h.config in seen or not study.space.is_valid(h.config):
                continue  # the space changed since: that point no longer belongs to it
            seen.add(h.config)
            # A candidate stopped early as slower has a (pessimistic) time: the strategy learns it.
            strategy.tell(h.config, h.time_ms if h.status.timed else None)
            result.stored += 1
            result.failures += not h.status.timed
            if h.status is Status.OK and (
                result.best is None or h.time_ms < result.best[1].time_ms
            ):
                result.best = (h.config, Measurement(Status.OK, time_ms=h.time_ms))
        self._emit(study, "start", result, target, counters)
        # Compile ahead: keep up to `jobs` asked configs compiling (on NVRTC worker processes
        # when compile_processes, else threads) while the GPU evaluates whichever is ready.
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
                    pending.append((config, self._pool.submit(self._compile, study, config)))
                if timed_out:
                    result.stopped = "time limit"
                if not pending or timed_out:
                    break
                config, future = next_ready(pending)  # whichever finished compiling first
                best_ms = result.best[1].time_ms if result.best else None
                m = self._launch(study, config, *future.result(), best_ms=best_ms)
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
                strategy.tell(config, m.time_ms if m.status.timed else None)
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
                    result.stopped = "taken over by another run"  # its lease ran out meanwhile
                    break
        finally:
            for _, future in pending:
                future.cancel()  # unevaluated configs are simply asked again next time
        if result.stopped == "space exhausted" and result.stored >= target:
            result.stopped = ""
        self._emit(study, "end", result, target, counters)

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
            )
        )

    # -- one configuration ---------------------------------------------------------------------

    def evaluate(self, study: Study, config: Config) -> Measurement:
        """Compile, check resources, then hand the job to the evaluator. Never raises for a
        failing configuration: every outcome becomes a Measurement with its status."""
        return self._launch(study, config, *self._compile(study, config))

    def _compile(self, study: Study, config: Config):
        """The CPU half of an evaluation (runs on the compile threads): plan and cubin, or the
        Measurement of a configuration that fails before reaching the GPU."""
        if self.evaluator.replays:  # a recording answers: nothing to plan, compile or launch
            return None, None, self.evaluator.recorded(study, config)
        plan = study.family.plan(study.problem, config)
        try:
            compiled = self.compiler.compile(plan)
        except CompileError as err:
            return (
                plan,
                None,
                Measurement(
                    Status.COMPILE_ERROR, error=str(err)[-4000:], scratch_bytes=plan.scratch_bytes
                ),
            )
        timed = [lc for lc in plan.launches if lc.kernel in compiled.resources]
        extra = {
            "compile_s": 0.0 if compiled.cached else compiled.compile_s,
            # What the timed kernels use (untimed layout helpers are not the candidate).
            "registers": max(
                (compiled.resources[lc.kernel].registers for lc in timed), default=None
            ),
            "smem_bytes": max(
                (compiled.resources[lc.kernel].smem_bytes + lc.smem_bytes for lc in timed),
                default=None,
            ),
            "spills": compiled.spills,
            "scratch_bytes": plan.scratch_bytes,
        }
        why = resource_problem(compiled, plan.all_launches, self.evaluator.limits)
        if why:
            return plan, None, Measurement(Status.RESOURCES, error=why, **extra)
        return plan, compiled, Measurement(Status.OK, **extra)

    def _launch(
        self,
        study: Study,
        config: Config,
        plan,
        compiled,
        early: Measurement,
        best_ms: float | None = None,
    ):
        """The GPU half: check and time a compiled plan; passes early failures through."""
        if compiled is None:
            return early
        family, problem = study.family, study.problem
        # A kernel given through tune_kernel brings its own check (its caller's answer).
        check = getattr(family, "given_check", None)
        if check is None:
            ref_plan, ref_compiled = self._reference(family, problem)
            check = Check(
                buffers=family.buffers(problem),
                reference_plan=ref_plan,
                reference_cubin=ref_compiled.cubin,
                reference_key=ref_compiled.key,
                tolerance=family.tolerance_for(problem),
                timing=self.timing,
                seed=zlib.crc32(f"{self.seed}|{study.label}|{config.to_json()}".encode()),
            )
        job = Job(
            label=f"{study.label} {config}",
            plan=plan,
            cubin=compiled.cubin,
            check=check,
            best_ms=best_ms,
        )
        busy_from = time.monotonic()
        try:
            m = self.evaluator.evaluate(job, job_timeout_s(problem.flops, self.timing, best_ms))
        finally:
            self.gpu_busy_s += time.monotonic() - busy_from
        return dataclasses.replace(
            m,
            compile_s=early.compile_s,
            registers=early.registers,
            smem_bytes=early.smem_bytes,
            spills=early.spills,
            scratch_bytes=early.scratch_bytes,
        )

    def _reference(self, family: Family, problem: Problem):
        plan = family.reference_plan(problem)
        if plan not in self._references:
            self._references[plan] = (plan, self.compiler.compile(plan))
        return self._references[plan]


__all__ = [
    "CampaignOutcome",
    "Progress",
    "Skipped",
    "Study",
    "StudyOutcome",
    "Tuner",
    "estimated_cost_s",
    "plan_studies",
    "register_device",
    "resource_problem",
    "job_timeout_s",
]
