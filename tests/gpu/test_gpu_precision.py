"""On a CUDA device: every dtype and layout stored, poisoned and checked as model/precision.py
says; cuDNN's baseline passes in each; an output missing one term of each sum fails; the
tensor-core ceilings are measured."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autotune.families import conv2d
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import Check, TimingPolicy
from autotune.gpu.storage import bf16_bits, stored_values
from autotune.model.precision import DTYPES, LAYOUTS, precision_of
from autotune.model.problem import ConvProblem
from autotune.model.records import Status

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)
COMBOS = list(itertools.product(DTYPES, LAYOUTS))

# Odd channel counts, output sizes, batches and strides (N, K, C, F, B, stride).
ODD = [(1, 3, 3, 5, 1, 1), (7, 5, 5, 3, 3, 2), (13, 3, 3, 7, 1, 4), (7, 1, 5, 9, 3, 4)]


def _problem(shape, dtype, layout) -> ConvProblem:
    return ConvProblem(*shape, dtype=dtype, layout=layout)


@pytest.fixture(scope="module")
def session():
    from autotune.gpu.session import GpuSession

    return GpuSession(0)


@pytest.fixture(scope="module")
def compiler(evaluator):
    return Compiler(arch=evaluator.device.arch)


def _check(compiler, problem: ConvProblem, seed: int = 11) -> Check:
    ref_plan = conv2d.reference_plan(problem)
    ref = compiler.compile(ref_plan)
    tolerance = problem.precision.tolerance
    return Check(conv2d.buffers(problem), ref_plan, ref.cubin, ref.key, tolerance, QUICK, seed)


@pytest.mark.parametrize(("dtype", "layout"), COMBOS)
def test_reference_plan_matches_numpy_on_the_stored_values(dtype, layout, session, compiler):
    import cupy as cp

    for shape in ODD:
        problem = _problem(shape, dtype, layout)
        arrays = session.fresh_inputs(conv2d.buffers(problem), seed=5)
        x, w = (stored_values(arrays[n].get(), dtype) for n in ("x", "w"))
        assert x.shape == problem.input_shape and w.shape == problem.filter_shape
        plan = conv2d.reference_plan(problem)
        functions = session.load(compiler.compile(plan).cubin, plan.entries)
        arrays["y_ref"] = cp.full(problem.output_shape, np.nan, dtype=cp.float64)
        session.runner(plan.launches, functions, arrays)()
        session.sync()
        np.testing.assert_allclose(
            arrays["y_ref"].get(),
            conv2d.reference_numpy(problem, x, w),
            rtol=1e-12,
            atol=1e-12,
            err_msg=problem.key,
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_inputs_are_the_fp32_draw_rounded_to_the_storage_type(dtype, session):
    import cupy as cp

    problem = _problem(ODD[1], dtype, "NHWC")
    buffers = conv2d.buffers(problem)
    stored = session.fresh_inputs(buffers, seed=9)
    draw = session.fresh_inputs(conv2d.buffers(_problem(ODD[1], "fp32", "NHWC")), seed=9)
    for name, _ in buffers.inputs:
        fp32 = draw[name].get()
        got = stored[name].get()
        want = {"fp32": fp32, "tf32": fp32, "fp16": fp32.astype(np.float16)}.get(dtype)
        want = bf16_bits(fp32) if want is None else want
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))
        assert isinstance(stored[name], cp.ndarray) and got.shape == dict(buffers.inputs)[name]


@pytest.mark.parametrize(("dtype", "layout"), COMBOS)
def test_poisoned_and_perturbed_outputs_fail_and_the_reference_passes(
    dtype, layout, session, compiler
):
    """The NaN poison of each storage type fails the check; the reference itself, rounded to
    the storage type, passes."""
    import cupy as cp

    problem = _problem(ODD[1], dtype, layout)
    check = _check(compiler, problem)
    arrays = session.fresh_inputs(check.buffers, check.seed)
    arrays["y"] = session.poisoned(problem.output_shape, dtype)
    assert check.wrong(session.check_outputs(check, arrays)) is not None
    # The reference's own output, stored in the dtype: within the tolerance.
    plan = check.reference_plan
    functions = session.load(check.reference_cubin, plan.entries)
    ref = {**arrays, "y_ref": cp.empty(problem.output_shape, dtype=cp.float64)}
    session.runner(plan.launches, functions, ref)()
    arrays["y"] = session.stored(ref["y_ref"].astype(cp.float32), dtype)
    error = session.check_outputs(check, arrays)
    assert check.wrong(error) is None, error
    # One infinite element fails.
    flat = arrays["y"].reshape(-1)
    flat[3] = session.stored(cp.asarray([np.inf], dtype=cp.float32), dtype)[0]
    assert not np.isfinite(session.check_outputs(check, arrays))


# Shapes for cuDNN: odd ones, and the one of the shape sets with the most terms per output
# (OverFeat L5's C * K * K = 9216), where dropping a term changes an output least.
CUDNN_SHAPES = [(7, 5, 5, 3, 3, 2), (13, 3, 3, 16, 1, 4), (12, 3, 1024, 64, 2, 1)]


@pytest.mark.parametrize(("dtype", "layout"), COMBOS)
def test_cudnn_baseline_passes_in_each_dtype_and_layout(dtype, layout, evaluator, compiler):
    pytest.importorskip("torch")
    from autotune.gpu.library_tasks import CudnnConv

    for shape in CUDNN_SHAPES[:2]:
        problem = _problem(shape, dtype, layout)
        result = evaluator.call(CudnnConv(problem, _check(compiler, problem)), timeout_s=300)
        m = result.measurement
        assert m.status is Status.OK, f"{problem.key}: {m.error}"
        assert m.rel_error <= precision_of(dtype).tolerance and m.time_ms > 0
        assert "NCHW output" not in result.algorithm, result.algorithm


@pytest.mark.parametrize(("dtype", "layout"), COMBOS)
def test_an_output_missing_one_term_of_each_sum_fails(dtype, layout, evaluator, compiler):
    pytest.importorskip("torch")
    from autotune.gpu.torch_conv import CudnnPrecision, PrecisionProbe

    for shape in CUDNN_SHAPES:
        problem = _problem(shape, dtype, layout)
        check = _check(compiler, problem)
        probe = evaluator.call(CudnnPrecision(problem, check), timeout_s=300)
        assert isinstance(probe, PrecisionProbe), probe
        assert check.wrong(probe.cudnn) is None, (problem.key, probe)
        assert check.wrong(probe.dropped) is not None, (problem.key, probe)


def test_tensor_core_ceilings_are_plausible(evaluator, compiler):
    pytest.importorskip("torch")
    from autotune.gpu.library_tasks import TENSOR_CORE_CEILINGS, MeasureCeilings
    from autotune.tuning.baselines import CEILING_FMA_SOURCE

    fma = compiler.compile_source(CEILING_FMA_SOURCE, ())
    names = tuple(TENSOR_CORE_CEILINGS)
    result = evaluator.call(MeasureCeilings(fma.cubin, QUICK, names), timeout_s=300)
    assert isinstance(result, list), result
    values = {c.name: c.value for c in result}
    assert set(values) == set(names)  # only those asked for
    for name, value in values.items():
        assert 100_000 < value < 2_000_000, (name, value)  # GFlop/s
    assert values["tc_peak_tf32"] < values["tc_peak_bf16"]
