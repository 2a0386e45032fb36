"""The GPU runner: plan and compile a configuration here, check and time it in the GPU worker."""

from __future__ import annotations

import dataclasses
import zlib

from autotune.families import Family
from autotune.families.plan import KernelPlan
from autotune.gpu.compiler import CompileError, Compiler, lowered_plan
from autotune.gpu.jobs import Check, Job
from autotune.gpu.timing import TimingPolicy
from autotune.model.evaluator import Evaluator, WithOutputs
from autotune.model.problem import Problem
from autotune.model.records import Measurement, Status
from autotune.model.runner import Prepared
from autotune.model.space import Config
from autotune.tuning.studies import Study, job_timeout_s, resource_problem


class GpuRunner:
    """Measures on a GPU: `compiler` builds the cubins (in worker processes when `processes`
    and start() is given more than one job; else on the tuner's threads, which need no start-up
    but share one NVRTC), the evaluator (the GPU worker, or a stand-in with its interface)
    checks and times them."""

    in_order = False
    remeasures = True

    def __init__(self, compiler: Compiler, evaluator: Evaluator, processes: bool = False) -> None:
        self.compiler = compiler
        self.evaluator = evaluator
        self.processes = processes
        self.device = evaluator.device
        self.limits = evaluator.limits
        self.protocol = evaluator.protocol
        self.pins = {}
        self._references: dict[KernelPlan, tuple] = {}

    @property
    def compiler_version(self) -> str:
        return self.compiler.version

    @property
    def cache_error(self) -> str | None:
        return self.compiler.cache_error

    def kernel_digest(self, family: Family) -> str:
        """The family's code as this runner's compiler builds it (source, headers, options)."""
        return self.compiler.kernel_digest(family)

    def start(self, jobs: int) -> None:
        # NVRTC compiles one program at a time per process: real parallelism needs processes.
        if self.processes:
            self.compiler.start_pool(jobs)

    def stop(self) -> None:
        if self.processes:
            self.compiler.stop_pool()

    def prepare(self, study: Study, config: Config) -> Prepared:
        """Plan and cubin, or the Measurement of a configuration that fails before the GPU."""
        plan = study.family.plan(study.problem, config)
        try:
            compiled = self.compiler.compile(plan)
        except CompileError as err:
            failed = Measurement(
                Status.COMPILE_ERROR, error=str(err)[-4000:], scratch_bytes=plan.extra_bytes
            )
            return Prepared(failed)
        plan = lowered_plan(plan, compiled)  # a templated kernel's entry, as the cubin names it
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
            "scratch_bytes": plan.extra_bytes,  # scratch and counters
        }
        why = resource_problem(compiled, plan.all_launches, self.limits)
        if why:
            return Prepared(Measurement(Status.RESOURCES, error=why, **extra))
        return Prepared(Measurement(Status.OK, **extra), (plan, compiled))

    def measure(
        self,
        study: Study,
        config: Config,
        prepared: Prepared,
        *,
        best_ms: float | None,
        timing: TimingPolicy,
        seed: int,
    ) -> Measurement:
        """Check and time a prepared configuration in the worker; early failures pass through."""
        early = prepared.early
        if prepared.ready is None:
            return early
        plan, compiled = prepared.ready
        family, problem = study.family, study.problem
        check = study.check
        if check is None:
            ref_plan, ref_compiled = self._reference(family, problem)
            check = Check(
                buffers=family.buffers(problem),
                reference_plan=ref_plan,
                reference_cubin=ref_compiled.cubin,
                reference_key=ref_compiled.key,
                tolerance=family.tolerance_for(problem),
                timing=timing,
                seed=zlib.crc32(f"{seed}|{study.label}|{config.to_json()}".encode()),
            )
        job = Job(
            label=f"{study.label} {config}",
            plan=plan,
            cubin=compiled.cubin,
            check=check,
            best_ms=best_ms,
        )
        m = self.evaluator.evaluate(job, job_timeout_s(problem.flops, timing, best_ms))
        if isinstance(m, WithOutputs):
            outputs, m = m.received(), m.measurement
            if study.verify is not None:
                m = study.verify(outputs, m)
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

    def close(self) -> None:
        self.evaluator.close()


__all__ = ["GpuRunner"]
