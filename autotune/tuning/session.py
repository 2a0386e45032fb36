"""The session setup: store, runner and device registration, and the one place a Tuner is built.

Every caller that tunes (the CLI's commands, a Ray actor, the runtime's tune-on-miss,
tune_kernel, the benches) opens a session and asks it for a tuner, so every run records the same
versions and measures through the same runner seam.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autotune import __version__
from autotune.gpu.compiler import DEFAULT_CACHE, DEFAULT_OPTIONS, Compiler
from autotune.gpu.timing import TimingPolicy
from autotune.model.evaluator import Evaluator
from autotune.model.records import TIMING_PROTOCOL
from autotune.model.runner import Runner
from autotune.store import Store
from autotune.store.engine import check_creatable
from autotune.strategies import DEFAULT_STRATEGY
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import Progress
from autotune.tuning.tuner import Tuner, register_device


def versions(runner: Runner) -> dict[str, str]:
    """What a run records of the software that measured (DESIGN section 2)."""
    info = runner.device
    return {
        "autotune": __version__,
        "nvrtc": runner.compiler_version,
        "driver": info.driver_version,
        "cuda_runtime": info.runtime_version,
        "cupy": str(info.extra.get("cupy", "")),
        "python": platform.python_version(),
        "timing_protocol": str(TIMING_PROTOCOL),
    }


@dataclass
class Session:
    """An open store and a runner; the device is registered in the store when first needed (a
    campaign refused while it is planned writes nothing)."""

    store: Store
    runner: Runner
    _device_id: int | None = None

    @property
    def device_id(self) -> int:
        """The device's id in the store, inserting it the first time it is seen."""
        if self._device_id is None:
            self._device_id = register_device(self.store, self.runner)
        return self._device_id

    @property
    def device(self):
        return self.runner.device

    def tuner(
        self,
        command: str,
        *,
        strategy: str = DEFAULT_STRATEGY,
        seed: int = 0,
        timing: TimingPolicy | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        jobs: int | None = None,
        claim_studies: bool = True,
        confirm_best: bool = True,
    ) -> Tuner:
        """A tuner over this session's runner and store (`command` is stored with the run: the
        caller hides its passwords); with confirm_best, it measures each study's best again
        after its search (Tuner._confirm)."""
        return Tuner(
            self.runner,
            self.store,
            strategy=strategy,
            seed=seed,
            timing=timing,
            command=command,
            versions=versions(self.runner),
            on_progress=on_progress,
            jobs=jobs,
            device_id=self.device_id,
            claim_studies=claim_studies,
            confirm_best=confirm_best,
        )

    def measure_ceilings(self, say: Callable[[str], None] = lambda line: None) -> None:
        """Measure the device ceilings the store lacks (once per device, seconds): the runtime
        prices a plan's layout copies and unfused epilogue at the measured copy bandwidth, so a
        store tuned without them could not weigh those costs. A runner without a GPU worker
        (a replay) measures nothing."""
        from autotune.tuning.baselines import measure_ceilings

        if isinstance(self.runner, GpuRunner):
            r = self.runner
            measure_ceilings(r.evaluator, r.compiler, self.store, self.device_id, say)

    def close(self) -> None:
        """Stop the runner (the GPU worker) and close the store (SQLite folds its log in)."""
        try:
            self.runner.close()
        finally:
            self.store.close()


def open_gpu_session(
    storage: str,
    *,
    gpu: int = 0,
    cache_dir: Path | None = DEFAULT_CACHE,
    share: bool = False,
    say: Callable[[str], None] = lambda line: None,
    evaluator: Evaluator | None = None,
    options: tuple[str, ...] = DEFAULT_OPTIONS,
    compile_processes: bool = True,
) -> Session:
    """Open the store, start the GPU worker (or take `evaluator`, a stand-in with its
    interface) and register the device. A database that exists is opened before the GPU, so
    that a bad URL or a foreign database fails fast; a new SQLite file only once the GPU is up,
    so that a machine without one is left without an empty database."""
    from autotune.gpu.evaluator import GpuEvaluator

    new_file = "://" not in storage and not Path(storage).expanduser().exists()
    if new_file:
        check_creatable(storage)  # a path that cannot be created fails before the GPU starts
    store = None if new_file else Store(storage, share=share)
    try:
        if evaluator is None:
            say("autotune: starting the GPU worker ...")
            evaluator = GpuEvaluator(gpu)
        # A worker spawned without waiting (tune_kernel's) is waited for here: before a new
        # file is created, and after an existing one was opened while it booted.
        arch = evaluator.device.arch
        if store is None:
            store = Store(storage, share=share)
    except BaseException:
        if evaluator is not None:
            evaluator.close()
        if store is not None:
            store.close()
        raise
    compiler = Compiler(arch=arch, cache_dir=cache_dir, options=options)
    if compile_processes:  # NVRTC stays out of the process that drives the worker, as its pool
        compiler.in_children = True
    return Session(store, GpuRunner(compiler, evaluator, processes=compile_processes))


def open_replay_session(paths, storage: str | None, share: bool = False) -> Session:
    """A replay of recordings; storage None keeps the results in memory."""
    from autotune.replay.runner import open_replay

    store, runner = open_replay(paths, storage, share=share)
    return Session(store, runner)


__all__ = ["Session", "open_gpu_session", "open_replay_session", "versions"]
