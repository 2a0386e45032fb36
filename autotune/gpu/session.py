"""The GPU side: load cubins, fill buffers, launch, verify and time (the only CuPy importer).

Runs inside the evaluator's worker process, or in the caller's (InProcessEvaluator: tune_kernel's
default); nothing else in the package imports CuPy.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from autotune.families.plan import Buffers, KernelPlan, Launch
from autotune.gpu.jobs import STICKY_ERRORS, Check, Job, NoGpu, StickyCudaError, counters_left
from autotune.gpu.launch import (
    CUDA_ATTR,
    bind,
    device_limits,
    device_name,
    load_module,
    opt_in_shared_memory,
    prepare,
)
from autotune.gpu.observe import Rest, Watch
from autotune.gpu.storage import (
    ARRAY_DTYPES,
    AS_DOUBLE_CUDA,
    BF16_ROUND_CUDA,
    array_dtype,
    nan_fill,
    storage_of,
)
from autotune.gpu.timing import FLUSHES, TimingPolicy, flush_bytes
from autotune.model.evaluator import WithOutputs
from autotune.model.observe import THROTTLED, TRIES
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import DeviceLimits

try:
    import cupy as cp
except ImportError:  # pragma: no cover - cupy is a dependency; without it there is no GPU path
    cp = None


def _err_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".strip()


def _is_sticky(err: BaseException) -> bool:
    text = str(err).upper().replace("_", "")
    return any(tag in text for tag in STICKY_ERRORS)


_KERNELS: dict[str, object] = {}


def _kernel(name: str):
    """The session's elementwise and reduction kernels, made at first use."""
    found = _KERNELS.get(name)
    if found is not None:
        return found
    if name == "square":
        found = cp.ReductionKernel(
            "float64 r", "float64 s", "r * r", "a + b", "s = a", "0", "autotune_square"
        )
    elif name == "bf16_round":
        found = cp.ElementwiseKernel("float32 x", "uint16 y", BF16_ROUND_CUDA, "autotune_bf16")
    else:  # sqdiff of a storage type: the stored output against the float64 reference.
        # Fused, so huge outputs need no float64 temporaries: NaN/Inf in y make the sum non-finite.
        value = AS_DOUBLE_CUDA[name]
        found = cp.ReductionKernel(
            f"{ARRAY_DTYPES[name]} y, float64 r",
            "float64 s",
            f"({value} - r) * ({value} - r)",
            "a + b",
            "s = a",
            "0",
            f"autotune_sqdiff_{name}",
        )
    _KERNELS[name] = found
    return found


class GpuSession:
    """One CUDA device, held by one worker process (or by the caller's own)."""

    def __init__(self, device_index: int = 0) -> None:
        if cp is None:
            raise NoGpu("CuPy is not installed")
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as err:
            raise NoGpu(_err_text(err)) from None
        if count == 0:
            raise NoGpu("no CUDA device found")
        if device_index >= count:
            raise NoGpu(f"GPU {device_index} requested but only {count} present")
        self.device = cp.cuda.Device(device_index)
        self.device.use()
        self._reference_modules: dict[str, object] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="autotune-cubins-")
        self._flush_buffer = None  # allocated at the first timing, kept for the session
        self._events: list[tuple[object, object]] = []
        self._loaded = None  # the module of the last load(), kept loaded until the next
        self._rest: Rest | None = None  # NVML's view of the clock, opened at the first timing

    def current(self):
        """A context in which this session's device is the calling thread's current one, the
        thread's own restored after it (the session may be used from a thread that did not
        open it)."""
        return self.device

    def close(self) -> None:
        """Release what the session holds: a worker's exit does it anyway; a session opened in
        the caller's process leaves the caller's memory pool without its buffers."""
        self._flush_buffer = None
        self._events.clear()
        self._reference_modules.clear()
        self._loaded = None
        cp.get_default_memory_pool().free_all_blocks()
        self._tmp.cleanup()

    # -- description -----------------------------------------------------------------------

    def info(self) -> DeviceInfo:
        props = cp.cuda.runtime.getDeviceProperties(self.device.id)
        name = device_name(self.device.id)
        driver = cp.cuda.runtime.driverGetVersion()
        runtime = cp.cuda.runtime.runtimeGetVersion()
        clock_khz = props.get("clockRate", 0) or self._attribute("ClockRate")
        return DeviceInfo(
            name=name,
            compute_capability=f"{props['major']}.{props['minor']}",
            sm_count=int(props["multiProcessorCount"]),
            driver_version=f"{driver // 1000}.{driver % 1000 // 10}",
            runtime_version=f"{runtime // 1000}.{runtime % 1000 // 10}",
            clock_mhz=int(clock_khz) // 1000,
            memory_bytes=int(props["totalGlobalMem"]),
            extra={"cupy": cp.__version__},
        )

    def _attribute(self, name: str) -> int:
        try:
            return int(self.device.attributes.get(name, 0))
        except Exception:
            return 0

    def limits(self) -> DeviceLimits:
        return device_limits(self.device.id)

    # -- one configuration -----------------------------------------------------------------

    def evaluate(self, job: Job) -> Measurement:
        """Check, then time. Sticky faults raise StickyCudaError: the worker must be replaced."""
        return self.guarded(lambda: self._evaluate(job))

    def guarded(self, measure: Callable[[], Measurement]) -> Measurement:
        """Run a measurement; CUDA failures become a Measurement's status, sticky ones raise."""
        try:
            return measure()
        except StickyCudaError:
            raise
        except Exception as err:
            if _is_sticky(err):
                raise StickyCudaError(_err_text(err)) from None
            resources = "OUTOFRESOURCES" in str(err).upper().replace("_", "")
            status = Status.RESOURCES if resources else Status.LAUNCH_ERROR
            return Measurement(status, error=_err_text(err))
        finally:
            # Release this job's buffers; the pool would otherwise pin the peak of every shape.
            # After a sticky fault this fails too, and must not hide that fault.
            try:
                cp.get_default_memory_pool().free_all_blocks()
            except Exception:
                pass

    def _evaluate(self, job: Job) -> Measurement:
        plan = job.plan
        module, functions = load_module(job.cubin, plan.entries, self._tmp.name, keep=False)
        opt_in_shared_memory(functions, plan.all_launches)

        check = job.check  # a Check, or a tune_kernel's GivenCheck (gpu/given.py)
        arrays = check.arrays(self, plan)
        # Whatever the check: counters start at zero, and every run must leave them so.
        arrays.update(self.zeroed_counters(plan))
        # Untimed, declared: layout conversion, tables; then constants, which may copy a table
        # that setup computed into a scratch buffer (same stream, so in order).
        self.runner(plan.setup, functions, arrays)()
        for symbol, buffer in plan.constants:
            target = module.get_global(symbol)
            source = arrays[buffer]
            target.copy_from_device(source.data, source.nbytes)

        run = self.runner(plan.launches, functions, arrays)
        run()
        self.runner(plan.finish, functions, arrays)()
        self.sync()

        wrong, rel_error = check.verdict(self, arrays)
        if wrong is None:
            wrong = self.counters_kept(plan, arrays, rel_error, "checked run")
        if wrong is not None:
            return wrong
        # Before the timed runs, which may change them: the checked run's outputs.
        outputs = check.host_outputs(arrays) if check.outputs_back else None
        m = self.timed(run, check.timing, rel_error, job.best_ms)
        wrong = self.counters_kept(plan, arrays, rel_error, "timed runs")
        if wrong is not None:
            return wrong
        return m if outputs is None else WithOutputs(m, outputs)

    def timed(
        self,
        run: Callable[[], None],
        policy: TimingPolicy,
        rel_error: float | None = None,
        best_ms: float | None = None,
    ) -> Measurement:
        """A checked run's Measurement: its samples by protocol 2 (time_runs), SLOW where the
        policy stops it early, and the device's readings where the policy observes (NVML power,
        energy, clocks, temperature: gpu/observe.py) around the timed runs, with the energy
        window after them unless timing stopped early. Where the clocks are observed, a
        measurement whose timed runs ran throttled is timed again, up to the policy's
        throttled_retries more times (the first one not throttled is kept, else the fastest;
        `tries` says how many). Our kernels and the libraries' are measured by this one path."""
        clocks = policy.observe is not None and policy.observe.clocks
        tries = 1 + (max(policy.throttled_retries, 0) if clocks else 0)
        kept = [self._timed_once(run, policy, rel_error, best_ms)]
        while len(kept) < tries and kept[-1].status.ok and kept[-1].observed.get(THROTTLED):
            kept.append(self._timed_once(run, policy, rel_error, best_ms))
        m = min(kept, key=lambda m: (bool(m.observed.get(THROTTLED)), m.time_ms or 0.0))
        return (
            replace(m, observations=(*m.observations, (TRIES, float(len(kept))))) if clocks else m
        )

    def _timed_once(
        self, run: Callable[[], None], policy: TimingPolicy, rel_error, best_ms
    ) -> Measurement:
        stop = policy.early_stop
        rested_s = self.rest(policy)  # before the watch: its readings are the samples' own
        with Watch(policy.observe, self.device) as watch:
            samples = self.time_runs(run, policy, best_ms, rested=True)
            slow = stop is not None and stop.stops(samples, best_ms)
            if not slow:
                watch.window(run, self.sync, statistics.median(samples))
        readings = watch.readings(rested_s=rested_s)
        m = Measurement.from_samples(samples, rel_error=rel_error, **readings)
        if slow:
            m = replace(m, status=Status.SLOW, error=stop.reason(samples, best_ms))
        return m

    def load(self, cubin: bytes, entries: tuple[str, ...]) -> dict[str, object]:
        """Entry functions of a cubin (kept loaded until the next load)."""
        self._loaded = load_module(cubin, entries, self._tmp.name, keep=False)
        return self._loaded[1]

    def fresh_inputs(self, buffers: Buffers, seed: int) -> dict[str, object]:
        """Inputs drawn in FP32 from the seed (the same draws for every dtype), then rounded to
        the buffers' storage type."""
        rng = cp.random.default_rng(seed)
        arrays = {}
        for name, shape in buffers.inputs:
            # Uniform in [-1, 1): never all zeros, signs mixed so cancellation errors show.
            arrays[name] = self.stored(rng.random(shape, dtype=cp.float32) * 2 - 1, buffers.dtype)
        return arrays

    def stored(self, values, dtype: str):
        """An FP32 device array rounded to a dtype's storage type (nearest, ties to even): itself
        for FP32/TF32, float16 for FP16, uint16 BF16 bits for BF16."""
        storage = storage_of(dtype)
        if storage == "float32":
            return values
        if storage == "float16":
            return values.astype(cp.float16)
        return _kernel("bf16_round")(values)

    def poisoned(self, shape: tuple[int, ...], dtype: str):
        """A device array of a dtype's storage type filled with its NaN."""
        return cp.full(shape, nan_fill(dtype), dtype=array_dtype(dtype))

    def zeroed_counters(self, plan: KernelPlan) -> dict[str, object]:
        """The plan's counters (uint32), zeroed once, as a caller of the plan must."""
        return {name: cp.zeros(count, dtype=cp.uint32) for name, count in plan.counters}

    def counters_kept(
        self, plan: KernelPlan, arrays: dict[str, object], rel_error: float | None, after: str
    ) -> Measurement | None:
        """WRONG_RESULT where the runs so far left a counter of the plan non-zero, else None."""
        left = tuple(n for n, _ in plan.counters if int(cp.count_nonzero(arrays[n])))
        return counters_left(left, rel_error, after) if left else None

    def runner(self, launches: tuple[Launch, ...], functions, arrays):
        calls = bind(prepare(launches, functions), arrays)

        def run() -> None:
            for fn, grid, block, args, smem in calls:
                fn(grid, block, args, shared_mem=smem)

        return run

    def sync(self) -> None:
        try:
            self.device.synchronize()
        except Exception as err:
            if _is_sticky(err):
                raise StickyCudaError(_err_text(err)) from None
            raise

    def check_outputs(self, check: Check, arrays: dict[str, object]) -> float:
        loaded = self._reference_modules.get(check.reference_key)
        if loaded is None:
            loaded = load_module(
                check.reference_cubin, check.reference_plan.entries, self._tmp.name, keep=True
            )
            self._reference_modules[check.reference_key] = loaded
        functions = loaded[1]
        ref_arrays = {name: arrays[name] for name, _ in check.buffers.inputs}
        for name, shape in check.buffers.outputs:
            ref_arrays[f"{name}_ref"] = cp.empty(shape, dtype=cp.float64)
        self.runner(check.reference_plan.launches, functions, ref_arrays)()
        self.sync()
        sqdiff, square = _kernel(storage_of(check.buffers.dtype)), _kernel("square")
        num = den = 0.0
        for name, _ in check.buffers.outputs:
            num += float(sqdiff(arrays[name], ref_arrays[f"{name}_ref"]))
            den += float(square(ref_arrays[f"{name}_ref"]))
        del ref_arrays
        if den == 0.0:
            return 0.0 if num == 0.0 else float("inf")
        return float(np.sqrt(num / den))

    def rest(self, policy: TimingPolicy) -> float | None:
        """Wait, up to the policy's rest_s, for a clock that power or heat held down (the checked
        run and its float64 reference just before may have) to come back (gpu/observe.py's
        Rest); the seconds waited, None where it could not tell."""
        if policy.rest_s <= 0:
            return None
        if self._rest is None:
            self._rest = Rest(self.device)
        return self._rest(policy.rest_s)

    def time_runs(
        self, run, policy: TimingPolicy, best_ms: float | None = None, rested: bool = False
    ) -> list[float]:
        """Timing protocol 2 (DESIGN section 2): per sample, a write of a scratch buffer larger
        than the L2 is queued, then the start event, the run's launches and the end event. The
        host queues a batch of samples without waiting, so it submits each sample's launches
        while the GPU is still busy with its flush: every sample starts with a cold L2, and the
        host's submission is not counted. Every second sample is flushed twice (FLUSHES).
        Batches follow the policy (autotune/timing.py). Every measurement, candidate, library
        or ceiling, starts rested (rest(), unless the caller has just rested)."""
        if not rested:
            self.rest(policy)
        for _ in range(policy.warmup):
            run()
        self.sync()
        flush = self._l2_flush()
        samples: list[float] = []
        began = time.perf_counter()
        batch = policy.first_batch(best_ms)
        while batch > 0:
            events = self._event_pairs(batch)
            for k, (start, end) in enumerate(events):
                for _ in range(FLUSHES[(len(samples) + k) % len(FLUSHES)]):
                    flush()
                start.record()
                run()
                end.record()
            events[-1][1].synchronize()
            samples += [cp.cuda.get_elapsed_time(start, end) for start, end in events]
            batch = policy.next_batch(samples, time.perf_counter() - began, best_ms)
        self.sync()
        return samples

    def _l2_flush(self) -> Callable[[], None]:
        """A function queueing the flush: a memset of a buffer of twice the L2 (or more) on the
        current stream, the stream the samples' events and launches use too."""
        if self._flush_buffer is None:
            l2 = self._attribute_code(CUDA_ATTR["L2CacheSize"])
            self._flush_buffer = cp.empty(flush_bytes(l2), dtype=cp.uint8)
        buffer = self._flush_buffer

        def flush() -> None:
            stream = cp.cuda.get_current_stream().ptr
            cp.cuda.runtime.memsetAsync(buffer.data.ptr, 0, buffer.nbytes, stream)

        return flush

    def _event_pairs(self, count: int) -> list[tuple[object, object]]:
        """count (start, end) event pairs, reused across batches once their times are read."""
        while len(self._events) < count:
            self._events.append((cp.cuda.Event(), cp.cuda.Event()))
        return self._events[:count]

    def _attribute_code(self, code: int) -> int:
        return int(cp.cuda.runtime.deviceGetAttribute(code, self.device.id))
