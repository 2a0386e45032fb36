"""Library baselines (cuDNN through PyTorch, cuBLAS through CuPy) and device ceilings, timed in
the GPU worker by the same protocol as the tuned kernels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from autotune.gpu.session import Check, GpuSession, TimingPolicy
from autotune.gpu.torch_conv import TORCH_DTYPES, cudnn_settings, operands, output_array
from autotune.model.precision import CEILING_NAMES, PRECISIONS, TENSOR_CORE_CEILINGS
from autotune.model.problem import ConvProblem, GemmProblem
from autotune.model.records import Measurement, Status

FMA_CHAINS, FMA_UNROLL = 8, 64  # as in autotune/gpu/ceiling_fma.cu
FMA_THREADS, FMA_BLOCKS_PER_SM, FMA_ITERATIONS = 256, 8, 2048
COPY_BYTES = 1 << 30
SGEMM_SIZE = 8192
TC_GEMM_SIZE = 8192
# The tensor-core GEMMs run into the board's power limit, and their protocol-2 medians differ by
# 10-14 % from one measurement to the next (2026-11-25): the peak is the best of a few (the wgmma
# loop's too, which draws as much power).
TC_PEAK_MEASUREMENTS = 3
# The tensor-core peak on compute capability 9.0: autotune/gpu/ceiling_wgmma.cu, compiled for
# sm_90a per dtype (its STORAGE), one block per SM.
WGMMA_CAPABILITY = "9.0"
WGMMA_STORAGE = {"tf32": 0, "fp16": 1, "bf16": 2}
WGMMA_WARPGROUPS, WGMMA_GROUP = 2, 4  # as in ceiling_wgmma.cu: warpgroups a block, wgmmas a group
WGMMA_M, WGMMA_N = 64, 256
WGMMA_K = {"tf32": 8, "fp16": 16, "bf16": 16}  # 32 bytes of K a wgmma
# Groups each warpgroup issues: a group of four m64n256 wgmmas keeps an SM's tensor cores busy
# 4 * 128 clocks in every dtype (4096 bf16 or 2048 tf32 FLOPs a clock), two warpgroups' 1,024
# clocks an iteration, so 2048 iterations last about 1.1 ms at 1.83 GHz (H100/H200: ~990 TFLOP/s
# dense bf16 on 132 SMs), whatever the SM count (a block an SM).
WGMMA_ITERATIONS = 2048


def wgmma_peak_flops(dtype: str, iterations: int, blocks: int) -> int:
    """FLOPs of one launch of ceiling_wgmma.cu in a dtype: every warpgroup of every block issues
    `iterations` groups of WGMMA_GROUP m64n256 wgmmas, 2 * 64 * 256 * k FLOPs each."""
    per_wgmma = 2 * WGMMA_M * WGMMA_N * WGMMA_K[dtype]
    return per_wgmma * WGMMA_GROUP * iterations * WGMMA_WARPGROUPS * blocks


def wgmma_defines(dtype: str) -> tuple[tuple[str, int], ...]:
    """ceiling_wgmma.cu's defines for a tensor-core dtype."""
    return (("STORAGE", WGMMA_STORAGE[dtype]),)


@dataclass(frozen=True, slots=True)
class BaselineResult:
    measurement: Measurement
    algorithm: str = ""  # the kernels the library launched
    version: str = ""
    available: bool = True  # False: the library is missing, so no shape can be measured


@dataclass(frozen=True, slots=True)
class Ceiling:
    name: str
    value: float
    unit: str
    detail: str
    samples_ms: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class CudnnConv:
    """cuDNN's forward convolution of one problem through PyTorch, in the problem's dtype and
    layout (gpu/torch_conv.py: views of the session's buffers, TF32 only for tf32), algorithm
    chosen by cuDNN's own search (benchmark mode), checked against the float64 reference with
    the dtype's tolerance, then timed."""

    problem: ConvProblem
    check: Check

    def run(self, session: GpuSession) -> BaselineResult:
        try:
            import torch
        except ImportError:
            return BaselineResult(
                Measurement(Status.LAUNCH_ERROR, error="PyTorch is not importable: no cuDNN"),
                available=False,
            )
        if not torch.backends.cudnn.is_available():
            return BaselineResult(
                Measurement(Status.LAUNCH_ERROR, error="PyTorch has no cuDNN"), available=False
            )
        cudnn_settings(torch, self.problem.dtype)
        version = str(torch.backends.cudnn.version())
        found: dict[str, str] = {}

        def measure() -> Measurement:
            arrays = session.fresh_inputs(self.check.buffers, self.check.seed)
            x, w = operands(torch, self.problem, arrays)
            stride, padding = self.problem.stride, self.problem.padding  # cuDNN pads itself

            def run() -> None:
                torch.nn.functional.conv2d(x, w, stride=stride, padding=padding)

            y = torch.nn.functional.conv2d(x, w, stride=stride, padding=padding)  # its search
            # NHWC: cuDNN's channels-last output is the NHWF buffer itself; where it wrote NCHW
            # instead, the check sees a copy (made here, untimed) and the algorithm says so.
            arrays["y"], copied = output_array(torch, self.problem, y)
            session.sync()
            rel_error = session.check_outputs(self.check, arrays)
            wrong = self.check.wrong(rel_error)
            if wrong is not None:
                return wrong
            note = " [NCHW output for an NHWC problem]" if copied else ""
            found["algorithm"] = _launched_kernels(torch, run) + note
            return session.timed(run, self.check.timing, rel_error)

        try:
            m = session.guarded(measure)
        finally:
            torch.cuda.empty_cache()
        return BaselineResult(m, found.get("algorithm", ""), version)


# The start of the text (a regular expression, matched from the message's start) of PyTorch's
# warning that its profiler keeps only the current cycle's events.
PROFILER_CYCLE_WARNING = r"(Warning: )?Profiler clears events at the end of each cycle"


def _launched_kernels(torch, run) -> str:
    """Names of the GPU kernels one call launches: the algorithm cuDNN picked, in practice."""
    try:
        import warnings

        from torch.profiler import ProfilerActivity, profile

        # PyTorch warns about its own event buffer (we run one cycle, so nothing is cleared):
        # that one is about the profiler's internals, not about anything the user can change.
        # It may come from the profiler's start, stop or events(), so the filter spans them all;
        # every other warning still reaches the user.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=PROFILER_CYCLE_WARNING, category=UserWarning)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                run()
                torch.cuda.synchronize()
            names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
        return "; ".join(names)[:1000]
    except Exception as err:  # the profiler is a nicety; the timing does not depend on it
        return f"(unknown: {type(err).__name__})"


@dataclass(frozen=True, slots=True)
class CublasGemm:
    """cuBLAS SGEMM of one problem through cupy.matmul, as the SGEMM ceiling measures it: FP32
    storage and compute, TF32 off (CuPy's default; CUPY_TF32=1 would turn it on, and the 1e-5
    check would then fail). Checked against the float64 reference, then timed. FP32 only: a
    GemmProblem has no dtype."""

    problem: GemmProblem
    check: Check

    def run(self, session: GpuSession) -> BaselineResult:
        import os

        import cupy as cp

        try:
            handle = cp.cuda.device.get_cublas_handle()
            version = str(cp.cuda.cublas.getVersion(handle))
        except Exception as err:  # no cuBLAS library in this CuPy installation
            return BaselineResult(
                Measurement(Status.LAUNCH_ERROR, error=f"cuBLAS unavailable: {err}"),
                available=False,
            )
        tf32 = os.environ.get("CUPY_TF32", "0")
        algorithm = f"cupy.matmul -> cuBLAS GEMM, FP32 compute (CUPY_TF32={tf32})"

        def measure() -> Measurement:
            arrays = session.fresh_inputs(self.check.buffers, self.check.seed)
            a, b = arrays["a"], arrays["b"]
            c = cp.full(self.problem.c_shape, cp.nan, dtype=cp.float32)

            def run() -> None:
                cp.matmul(a, b, out=c)

            run()
            session.sync()
            arrays["c"] = c
            rel_error = session.check_outputs(self.check, arrays)
            wrong = self.check.wrong(rel_error)
            if wrong is not None:
                return wrong
            return session.timed(run, self.check.timing, rel_error)

        return BaselineResult(session.guarded(measure), algorithm, version)


@dataclass(frozen=True, slots=True)
class MeasureCeilings:
    """The ceilings named (all by default), by the timing protocol: FP32 FMA peak, device-to-
    device copy bandwidth, cuBLAS SGEMM, and the dense tensor-core peak of TF32, BF16 and FP16.
    A tensor-core peak is our own wgmma loop's rate (ceiling_wgmma.cu, the units' rate as
    fma_peak is the FMA units') on compute capability 9.0 where `wgmma_cubins` holds its dtype's
    cubin, else cuBLAS's GEMM through PyTorch; a peak that needs PyTorch where it is not
    importable is left out of the list (the caller says so); any other failure is the answer."""

    fma_cubin: bytes
    timing: TimingPolicy
    names: tuple[str, ...] = CEILING_NAMES
    wgmma_cubins: Mapping[str, bytes] = field(default_factory=dict)  # by dtype; sm_90a
    wgmma_iterations: int = WGMMA_ITERATIONS

    def run(self, session: GpuSession) -> list[Ceiling] | Measurement:
        import cupy as cp

        ceilings: list[Ceiling] = []

        def fma() -> Measurement:
            functions = session.load(self.fma_cubin, ("fma_peak",))
            sms = session.limits().SM_COUNT
            blocks = sms * FMA_BLOCKS_PER_SM
            out = cp.zeros(blocks * FMA_THREADS, dtype=cp.float32)
            kernel = functions["fma_peak"]
            args = (out, cp.int32(FMA_ITERATIONS))

            def run() -> None:
                kernel((blocks,), (FMA_THREADS,), args)

            run()
            samples = session.time_runs(run, self.timing)
            m = Measurement.from_samples(samples)
            flops = 2 * FMA_CHAINS * FMA_UNROLL * FMA_ITERATIONS * blocks * FMA_THREADS
            ceilings.append(
                Ceiling(
                    "fma_peak",
                    flops / (m.time_ms * 1e-3) / 1e9,
                    "GFlop/s",
                    f"{FMA_CHAINS} independent FMA chains per thread, {blocks} blocks of "
                    f"{FMA_THREADS} threads ({FMA_BLOCKS_PER_SM} per SM)",
                    m.samples_ms,
                )
            )
            return m

        def copy() -> Measurement:
            src = cp.ones(COPY_BYTES // 4, dtype=cp.float32)
            dst = cp.empty_like(src)

            def run() -> None:
                cp.copyto(dst, src)

            run()
            m = Measurement.from_samples(session.time_runs(run, self.timing))
            ceilings.append(
                Ceiling(
                    "copy_bandwidth",
                    2 * COPY_BYTES / (m.time_ms * 1e-3) / 1e9,
                    "GB/s",
                    f"device-to-device copy of {COPY_BYTES >> 20} MiB, bytes read plus written",
                    m.samples_ms,
                )
            )
            return m

        def sgemm() -> Measurement:
            n = SGEMM_SIZE
            rng = cp.random.default_rng(0)
            a = rng.random((n, n), dtype=cp.float32)
            b = rng.random((n, n), dtype=cp.float32)
            c = cp.empty((n, n), dtype=cp.float32)

            def run() -> None:
                cp.matmul(a, b, out=c)

            run()
            m = Measurement.from_samples(session.time_runs(run, self.timing))
            ceilings.append(
                Ceiling(
                    "sgemm",
                    2 * n**3 / (m.time_ms * 1e-3) / 1e9,
                    "GFlop/s",
                    f"cuBLAS SGEMM {n}^3 through CuPy, FP32 (TF32 off)",
                    m.samples_ms,
                )
            )
            return m

        measures = [("fma_peak", fma), ("copy_bandwidth", copy), ("sgemm", sgemm)]
        own_loop = session.info().compute_capability == WGMMA_CAPABILITY
        torch = None
        for name, dtype in TENSOR_CORE_CEILINGS.items():
            if name not in self.names:
                continue
            cubin = self.wgmma_cubins.get(dtype) if own_loop else None
            if cubin is not None:
                measures.append((name, self._wgmma_peak(session, cubin, dtype, name, ceilings)))
                continue
            if torch is None:
                try:
                    import torch
                except ImportError:
                    continue  # only this fallback needs PyTorch
            measures.append(
                (name, _tensor_core_peak(torch, session, self.timing, dtype, name, ceilings))
            )
        for name, measure in measures:
            if name not in self.names:
                continue
            m = session.guarded(measure)
            if torch is not None:
                torch.cuda.empty_cache()  # the GEMMs' operands, held by PyTorch's allocator
            if m.status is not Status.OK:
                return m
        return ceilings

    def _wgmma_peak(self, session, cubin: bytes, dtype: str, name: str, ceilings: list[Ceiling]):
        """A measurement of ceiling_wgmma.cu's loop in a dtype, one block per SM, the fastest of
        TC_PEAK_MEASUREMENTS, appending its ceiling."""
        import cupy as cp

        def measure() -> Measurement:
            kernel = session.load(cubin, ("wgmma_peak",))["wgmma_peak"]
            blocks = session.limits().SM_COUNT
            threads = 128 * WGMMA_WARPGROUPS
            out = cp.zeros(blocks * threads, dtype=cp.float32)
            args = (out, cp.int32(self.wgmma_iterations))

            def run() -> None:
                kernel((blocks,), (threads,), args)

            run()
            m = min(
                (
                    Measurement.from_samples(session.time_runs(run, self.timing))
                    for _ in range(TC_PEAK_MEASUREMENTS)
                ),
                key=lambda measured: measured.time_ms,
            )
            flops = wgmma_peak_flops(dtype, self.wgmma_iterations, blocks)
            shape = f"m{WGMMA_M}n{WGMMA_N}k{WGMMA_K[dtype]}"
            ceilings.append(
                Ceiling(
                    name,
                    flops / (m.time_ms * 1e-3) / 1e9,
                    "GFlop/s",
                    f"wgmma {shape} loop in {PRECISIONS[dtype].label}, operands in shared memory,"
                    f" FP32 accumulation (dense), {WGMMA_WARPGROUPS} warpgroups x {blocks} blocks,"
                    f" the best median of {TC_PEAK_MEASUREMENTS} measurements",
                    m.samples_ms,
                )
            )
            return m

        return measure


def _tensor_core_peak(torch, session, timing, dtype: str, name: str, ceilings: list[Ceiling]):
    """A measurement of cuBLAS's dense GEMM at TC_GEMM_SIZE^3 in a dtype through PyTorch (TF32:
    FP32 tensors with TF32 allowed), FP32 accumulation (PyTorch's reduced-precision reductions
    off), the fastest of TC_PEAK_MEASUREMENTS, appending its ceiling."""

    def measure() -> Measurement:
        n = TC_GEMM_SIZE
        kind = getattr(torch, TORCH_DTYPES[dtype])
        generator = torch.Generator(device="cuda").manual_seed(0)
        a, b = (
            (torch.rand((n, n), device="cuda", generator=generator) * 2 - 1).to(kind)
            for _ in range(2)
        )
        c = torch.empty((n, n), device="cuda", dtype=kind)
        matmul = torch.backends.cuda.matmul
        saved = (
            matmul.allow_tf32,
            matmul.allow_fp16_reduced_precision_reduction,
            matmul.allow_bf16_reduced_precision_reduction,
        )
        matmul.allow_tf32 = dtype == "tf32"
        matmul.allow_fp16_reduced_precision_reduction = False
        matmul.allow_bf16_reduced_precision_reduction = False
        try:

            def run() -> None:
                torch.matmul(a, b, out=c)

            run()
            m = min(
                (
                    Measurement.from_samples(session.time_runs(run, timing))
                    for _ in range(TC_PEAK_MEASUREMENTS)
                ),
                key=lambda measured: measured.time_ms,
            )
        finally:
            (
                matmul.allow_tf32,
                matmul.allow_fp16_reduced_precision_reduction,
                matmul.allow_bf16_reduced_precision_reduction,
            ) = saved
        ceilings.append(
            Ceiling(
                name,
                2 * n**3 / (m.time_ms * 1e-3) / 1e9,
                "GFlop/s",
                f"cuBLAS GEMM {n}^3 through PyTorch {torch.__version__}, {PRECISIONS[dtype].label}"
                f" on the tensor cores, FP32 accumulation (dense), the best median of"
                f" {TC_PEAK_MEASUREMENTS} measurements",
                m.samples_ms,
            )
        )
        return m

    return measure
