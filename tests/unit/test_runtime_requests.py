"""Which plan a call gets for its tensors' dtype, layout and TF32 permission (no GPU): the plan
choice over every problem the call allows, a plan in the other layout paying for its copies."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from autotune.model.problem import ConvProblem
from autotune.runtime.calls import Call, CallError, Request, layout_copy_bytes, padding_copy_bytes
from autotune.runtime.lookup import resolve
from autotune.runtime.pricing import OPERATION_MS, layout_ms, padding_ms
from tests.unit.test_runtime_lookup import LIMITS, Synthetic, config_of, space

SIZES = ConvProblem(N=32, K=3, C=64, F=64)
NEAR = ConvProblem(N=30, K=3, C=60, F=64)  # nothing stored: nearest to SIZES
COPY_GBPS = 3000.0


def as_(problem: ConvProblem, dtype: str, layout: str = "NHWC") -> ConvProblem:
    return replace(problem, dtype=dtype, layout=layout)


@pytest.fixture
def synthetic(tmp_path):
    return Synthetic(tmp_path / "requests.db", copy_gbps=COPY_GBPS)


def chosen(catalogue, storage, layout, tf32, sizes=SIZES):
    _, found = resolve(catalogue, sizes, LIMITS, "nearest", request=Request(storage, layout, tf32))
    return next(found, None)


def test_a_request_names_the_problems_that_may_serve_it():
    keys = [p.key for p in Request("float32", "NCHW", False).problems(SIZES)]
    assert keys == [SIZES.key, as_(SIZES, "fp32").key]
    tf32 = Request("float32", "NHWC", True).problems(SIZES)
    assert [(p.dtype, p.layout) for p in tf32] == [
        ("fp32", "NHWC"),
        ("fp32", "NCHW"),
        ("tf32", "NHWC"),
        ("tf32", "NCHW"),
    ]
    # 16-bit tensors in their own dtype only; TF32 permission means nothing to them.
    assert {p.dtype for p in Request("bfloat16", "NCHW", True).problems(SIZES)} == {"bf16"}
    assert {p.dtype for p in Request("float16", "NHWC").problems(SIZES)} == {"fp16"}
    assert Request.exactly(as_(SIZES, "tf32")) == Request("float32", "NHWC", True)
    with pytest.raises(CallError, match="layout"):
        Request("float32", "CHWN")


def test_tf32_plans_serve_fp32_calls_only_where_tf32_is_allowed(synthetic):
    synthetic.record("implicit_gemm", SIZES, config_of("implicit_gemm", SIZES), 1.0)
    tc = as_(SIZES, "tf32")
    synthetic.record("tc_implicit_gemm", tc, config_of("tc_implicit_gemm", tc), 0.2)
    catalogue = synthetic.catalogue()
    # TF32 off: never a tensor-core plan, whatever its time.
    strict = chosen(catalogue, "float32", "NCHW", False)
    assert (strict.family, strict.problem, strict.layout_ms) == ("implicit_gemm", SIZES, 0.0)
    # TF32 allowed, channels-last tensors: the tf32 NHWC plan, with no copy.
    fast = chosen(catalogue, "float32", "NHWC", True)
    assert (fast.family, fast.problem.dtype, fast.problem.layout) == (
        "tc_implicit_gemm",
        "tf32",
        "NHWC",
    )
    assert fast.layout_ms == 0.0 and fast.exact
    # TF32 allowed, contiguous tensors: the same plan, paying for the copies to and from NHWC.
    copied = chosen(catalogue, "float32", "NCHW", True)
    assert copied.family == "tc_implicit_gemm"
    assert copied.layout_ms == pytest.approx(layout_ms(tc, COPY_GBPS))
    assert copied.expected_ms == pytest.approx(0.2 + copied.layout_ms)
    # Channels-last with TF32 off: the FP32 NCHW plan, its copies paid for.
    back = chosen(catalogue, "float32", "NHWC", False)
    assert back.problem == SIZES and back.layout_ms > 0


def test_copies_that_cost_more_than_the_tensor_cores_save_keep_the_fp32_plan(synthetic):
    tc = as_(SIZES, "tf32")
    copies = layout_ms(tc, COPY_GBPS)
    assert copies == pytest.approx(layout_copy_bytes(tc) / 3e12 * 1e3 + 3 * 0.002)
    synthetic.record("implicit_gemm", SIZES, config_of("implicit_gemm", SIZES), 0.1)
    synthetic.record("tc_implicit_gemm", tc, config_of("tc_implicit_gemm", tc), 0.1 - copies / 2)
    catalogue = synthetic.catalogue()
    assert chosen(catalogue, "float32", "NCHW", True).family == "implicit_gemm"
    assert chosen(catalogue, "float32", "NHWC", True).family == "tc_implicit_gemm"


def test_16_bit_calls_get_plans_of_their_own_dtype_only(synthetic):
    bf16 = as_(SIZES, "bf16")
    synthetic.record("implicit_gemm", SIZES, config_of("implicit_gemm", SIZES), 0.001)
    synthetic.record("tc_wgmma", bf16, config_of("tc_wgmma", bf16), 0.3)
    catalogue = synthetic.catalogue()
    got = chosen(catalogue, "bfloat16", "NHWC", False)
    assert (got.family, got.problem, got.layout_ms) == ("tc_wgmma", bf16, 0.0)
    # A contiguous bf16 call: the NHWC plan still (no family reads bf16 NCHW), with its copies.
    got = chosen(catalogue, "bfloat16", "NCHW", False)
    assert got.problem == bf16 and got.layout_ms > 0
    # FP16 tensors: nothing stored in fp16, and a bf16 plan never serves them.
    assert chosen(catalogue, "float16", "NHWC", False) is None


def test_a_miss_borrows_the_nearest_shape_of_a_dtype_the_call_allows(synthetic):
    synthetic.record("implicit_gemm", SIZES, config_of("implicit_gemm", SIZES), 1.0)
    tc = as_(SIZES, "tf32")
    synthetic.record("tc_implicit_gemm", tc, config_of("tc_implicit_gemm", tc), 0.2)
    catalogue = synthetic.catalogue()
    strict = chosen(catalogue, "float32", "NCHW", False, NEAR)
    assert (strict.family, strict.problem, strict.measured_on) == ("implicit_gemm", NEAR, SIZES.key)
    fast = chosen(catalogue, "float32", "NHWC", True, NEAR)
    assert (fast.family, fast.problem) == ("tc_implicit_gemm", as_(NEAR, "tf32"))
    assert not fast.exact and fast.measured_on == tc.key
    # The borrowed configuration is valid for the call's shape.
    assert space("tc_implicit_gemm", fast.problem).is_valid(fast.config)
    # Every choice the call gets computes a dtype it allows.
    _, found = resolve(catalogue, NEAR, LIMITS, "nearest", request=Request("bfloat16", "NHWC"))
    assert list(found) == []


def test_without_a_copy_bandwidth_a_plan_in_the_other_layout_ranks_last(tmp_path):
    synthetic = Synthetic(tmp_path / "bare.db", copy_gbps=None)
    tc = as_(SIZES, "tf32")
    synthetic.record("implicit_gemm", SIZES, config_of("implicit_gemm", SIZES), 9.0)
    synthetic.record("tc_implicit_gemm", tc, config_of("tc_implicit_gemm", tc), 0.1)
    catalogue = synthetic.catalogue()
    assert chosen(catalogue, "float32", "NCHW", True).family == "implicit_gemm"
    _, found = resolve(
        catalogue, SIZES, LIMITS, "nearest", request=Request("float32", "NCHW", True)
    )
    last = list(found)[-1]
    assert last.family == "tc_implicit_gemm" and math.isinf(last.layout_ms)


def test_tune_on_miss_tunes_every_problem_the_call_allows(synthetic):
    asked = []

    def tune(problems):
        asked.extend(problems)
        bf16 = problems[0]
        synthetic.record("tc_wgmma", bf16, config_of("tc_wgmma", bf16), 0.3)
        return synthetic.catalogue()

    request = Request("bfloat16", "NHWC")
    _, found = resolve(synthetic.catalogue(), SIZES, LIMITS, "tune", tune, request)
    assert asked == [as_(SIZES, "bf16"), as_(SIZES, "bf16", "NCHW")]
    first = next(found)
    assert first.exact and first.problem == as_(SIZES, "bf16")


def test_the_padding_copy_is_priced_as_its_read_and_write_at_the_copy_bandwidth():
    # VGG-16's second convolution in bf16: a 224 x 224 input padded to 226 x 226. On the H200
    # (4222 GB/s) the layer took 0.104 ms more in the model than stored (results/h200/20261129e).
    problem = ConvProblem(N=224, K=3, C=64, F=64, B=32, dtype="bf16", layout="NHWC")
    assert problem.input_size == 226
    assert padding_copy_bytes(problem, 224, 224) == 2 * 32 * 64 * (224 * 224 + 226 * 226)
    ms = padding_ms(problem, 224, 224, 4222.0)
    assert ms == pytest.approx(0.0982 + OPERATION_MS, abs=1e-4)
    assert padding_ms(problem, 224, 224, None) == math.inf  # no bandwidth measured: unknown


# A padded call (PyTorch's padding=1 on a 3x3 layer): tc_wgmma reads the padded problem in
# place; every family, tc_wgmma included, may serve it pre-padded from the runtime's copy.
PADDED_CALL = Call.of((0, 32, 64, 56, 56, 64, 64, 3, 3, 1, 1, "bfloat16", "NHWC"))


def test_a_padded_call_is_a_padded_problem_where_its_input_can_be_read_in_place():
    sizes = PADDED_CALL.problem()
    assert (sizes.N, sizes.padding, sizes.input_size) == (56, 0, 58)  # the copy's
    padded = PADDED_CALL.padded_problem()
    assert (padded.N, padded.padding, padded.input_size) == (56, 1, 56)
    assert PADDED_CALL.request.padding == 1
    keys = [p.key for p in PADDED_CALL.request.problems(sizes)]
    assert keys == [as_(padded, "bf16").key, as_(sizes, "bf16").key] + [
        as_(padded, "bf16", "NCHW").key,
        as_(sizes, "bf16", "NCHW").key,
    ]
    # Stride 2 over 56 (ResNet-50's downsampling 3x3): the last input row lies past every
    # window, the problem's tail, read in place too.
    strided = Call.of((0, 32, 128, 56, 56, 128, 128, 3, 3, 2, 1, "bfloat16", "NHWC"))
    own = strided.padded_problem()
    assert (own.N, own.padding, own.tail, own.input_size) == (28, 1, 1, 56)
    assert (strided.request.padding, strided.request.tail) == (1, 1)
    assert [(p.padding, p.tail) for p in strided.request.problems(strided.problem())][:2] == [
        (1, 1),
        (0, 0),
    ]
    # Its 1x1 twin has no padding, only the tail.
    down = Call.of((0, 32, 256, 56, 56, 512, 256, 1, 1, 2, 0, "bfloat16", "NHWC"))
    assert (down.padded_problem().padding, down.padded_problem().tail) == (0, 1)
    # No padding and no tail, or a padding past the filter's reach: nothing to read in place.
    assert Call.of((0, 1, 8, 8, 8, 8, 8, 3, 3, 1, 0)).padded_problem() is None
    assert Call.of((0, 1, 8, 8, 8, 8, 8, 3, 3, 1, 3)).padded_problem() is None
    assert Call.of((0, 1, 8, 9, 9, 8, 8, 3, 3, 2, 0)).padded_problem() is None


def test_a_padded_plan_wins_where_it_is_faster_than_a_pre_padded_one_and_its_copy(
    synthetic, tmp_path
):
    sizes, padded = as_(PADDED_CALL.problem(), "bf16"), as_(PADDED_CALL.padded_problem(), "bf16")
    copy = padding_ms(sizes, 56, 56, COPY_GBPS)
    moved = 2 * 32 * 64 * (56 * 56 + 58 * 58)  # the input read, its padded copy written
    assert copy == pytest.approx(moved / (COPY_GBPS * 1e9) * 1e3 + OPERATION_MS)
    synthetic.record("tc_wgmma", sizes, config_of("tc_wgmma", sizes), 0.100)
    synthetic.record("tc_wgmma", padded, config_of("tc_wgmma", padded), 0.100 + copy / 2)
    _, found = resolve(synthetic.catalogue(), PADDED_CALL.problem(), LIMITS, "error",
                       request=PADDED_CALL.request)  # fmt: skip
    first, second = list(found)[:2]
    assert (first.problem, first.padding_ms) == (padded, 0.0)
    assert second.problem == sizes and second.padding_ms == pytest.approx(copy)
    assert second.expected_ms == pytest.approx(0.100 + copy)
    # Slower than the pre-padded plan and its copy together, the padded plan comes second.
    slow = Synthetic(tmp_path / "slow.db", copy_gbps=COPY_GBPS)
    slow.record("tc_wgmma", sizes, config_of("tc_wgmma", sizes), 0.100)
    slow.record("tc_wgmma", padded, config_of("tc_wgmma", padded), 0.100 + 2 * copy)
    _, found = resolve(slow.catalogue(), PADDED_CALL.problem(), LIMITS, "error",
                       request=PADDED_CALL.request)  # fmt: skip
    assert next(found).problem == sizes
