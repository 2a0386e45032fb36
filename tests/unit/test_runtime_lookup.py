"""The runtime's plan lookup and miss policies, on a synthetic store (no GPU)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from autotune.families import FAMILIES
from autotune.families.plan import Launch
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import ARCH_LIMITS, Config
from autotune.runtime.choice import callable_family
from autotune.runtime.lookup import Catalogue, resolve
from autotune.runtime.pricing import untimed_bytes, untimed_ms
from autotune.store import Store

DEVICE = "Synthetic GPU"
LIMITS = ARCH_LIMITS["sm_90"]
A = ConvProblem(N=32, K=3, C=64, F=64)
A_FAR = ConvProblem(N=256, K=7, C=256, F=256)
NEW = ConvProblem(N=30, K=3, C=60, F=64)  # nearest to A
LAYER = ConvProblem(N=13, K=3, C=256, F=256, B=128)


def space(family: str, problem: ConvProblem):
    return FAMILIES[family].load_space().bind(problem.fields(), LIMITS)


def config_of(family: str, problem: ConvProblem, index: int = 0) -> Config:
    return space(family, problem).configs[index]


class Synthetic:
    """A store with one synthetic device and whatever the test records on it."""

    def __init__(self, path, copy_gbps: float | None = 3000.0) -> None:
        self.store = Store(str(path))
        self.device_id = self.store.register_device(
            DeviceInfo(name=DEVICE, compute_capability="9.0", sm_count=132)
        )
        self.run_id = self.store.start_run(self.device_id, "test", {})
        if copy_gbps:
            self.store.record_ceiling(self.device_id, "copy_bandwidth", copy_gbps, "GB/s", "")

    def record(self, family, problem, config, time_ms, status=Status.OK, protocol=None, digest=""):
        m = Measurement(status, time_ms=time_ms, samples_ms=(time_ms,), error="")
        if protocol is not None:
            m = Measurement(status, time_ms=time_ms, samples_ms=(time_ms,), protocol=protocol)
        self.store.record(
            self.run_id, self.device_id, family, problem, config, m, problem.flops, digest
        )

    def catalogue(self, **kwargs) -> Catalogue:
        return Catalogue.from_store(self.store, DEVICE, **kwargs)


@pytest.fixture
def synthetic(tmp_path):
    return Synthetic(tmp_path / "runtime.db")


def test_the_fastest_verified_family_of_the_shape_is_chosen(synthetic):
    synthetic.record("implicit_gemm", A, config_of("implicit_gemm", A), 0.020)
    synthetic.record("chen_general", A, config_of("chen_general", A), 0.015)
    synthetic.record("chen_general", A, config_of("chen_general", A, 1), 0.030)
    # A wrong result is never a best, however fast.
    synthetic.record("direct_naive", A, config_of("direct_naive", A), 0.001, Status.WRONG_RESULT)
    choices = synthetic.catalogue().stored(A)
    assert [(c.family, c.time_ms) for c in choices] == [
        ("chen_general", 0.015),
        ("implicit_gemm", 0.020),
    ]
    best = choices[0]
    assert best.exact and best.config == config_of("chen_general", A)
    assert best.untimed_ms == 0.0


def test_measurements_of_another_protocol_or_device_are_not_read(synthetic, tmp_path):
    synthetic.record("chen_general", A, config_of("chen_general", A), 0.015, protocol=1)
    other = synthetic.store.register_device(
        DeviceInfo(name="Other GPU", compute_capability="8.0", sm_count=108)
    )
    run = synthetic.store.start_run(other, "test", {})
    m = Measurement(Status.OK, time_ms=0.01, samples_ms=(0.01,))
    synthetic.store.record(run, other, "implicit_gemm", A, config_of("implicit_gemm", A), m, 1)
    catalogue = synthetic.catalogue()
    assert catalogue.stored(A) == []
    assert list(resolve(catalogue, A, LIMITS, "nearest")[1]) == []
    assert "no verified" in catalogue.miss_reason(A, "nearest")


def test_a_family_that_converts_layouts_pays_for_it_at_the_copy_bandwidth(synthetic):
    maxdnn = FAMILIES["maxdnn"]
    config = config_of("maxdnn", LAYER)
    plan = maxdnn.plan(LAYER, config)
    # x and its CHWN copy, w and its transpose, the offsets, y and its FHWN copy, the offsets
    # copied into constant memory.
    moved = untimed_bytes(maxdnn, LAYER, plan)
    x_bytes = 4 * math.prod(LAYER.input_shape)
    y_bytes = 4 * math.prod(LAYER.output_shape)
    assert moved > 2 * (x_bytes + y_bytes)
    cost = untimed_ms(maxdnn, LAYER, plan, 3000.0)
    assert cost == pytest.approx(moved / 3e12 * 1e3 + 5 * 0.002)
    # maxdnn faster by less than its conversions: implicit_gemm serves the shape.
    synthetic.record("maxdnn", LAYER, config, 0.50)
    synthetic.record("implicit_gemm", LAYER, config_of("implicit_gemm", LAYER), 0.50 + cost / 2)
    assert synthetic.catalogue().stored(LAYER)[0].family == "implicit_gemm"
    # Faster by more: maxdnn, conversions and all.
    synthetic.record("chen_general", LAYER, config_of("chen_general", LAYER), 0.50 + 2 * cost)
    synthetic.store.forget("implicit_gemm")
    assert synthetic.catalogue().stored(LAYER)[0].family == "maxdnn"


def test_counters_an_untimed_launch_touches_are_priced_as_any_buffer():
    family = FAMILIES["implicit_gemm"]
    plan = family.plan(A, config_of("implicit_gemm", A))
    assert untimed_bytes(family, A, plan) == 0
    clear = Launch("clear_flags", (1, 1, 1), (32, 1, 1), ("flags",))
    counted = replace(plan, counters=(("flags", 100),), finish=(clear,))
    assert untimed_bytes(family, A, counted) == 4 * 100


def test_without_a_copy_bandwidth_a_converting_family_ranks_last(tmp_path):
    synthetic = Synthetic(tmp_path / "bare.db", copy_gbps=None)
    synthetic.record("maxdnn", LAYER, config_of("maxdnn", LAYER), 0.1)
    synthetic.record("implicit_gemm", LAYER, config_of("implicit_gemm", LAYER), 9.0)
    families = [c.family for c in synthetic.catalogue().stored(LAYER)]
    assert families == ["implicit_gemm", "maxdnn"]


def test_a_miss_takes_the_nearest_shapes_fastest_family_made_valid(synthetic):
    synthetic.record("chen_general", A, config_of("chen_general", A, 3), 0.015)
    synthetic.record("implicit_gemm", A, config_of("implicit_gemm", A), 0.020)
    synthetic.record("implicit_gemm", A_FAR, config_of("implicit_gemm", A_FAR), 1.0)
    catalogue = synthetic.catalogue()
    assert catalogue.stored(NEW) == []
    _, found = resolve(catalogue, NEW, LIMITS, "nearest")
    choice = next(found)
    assert (choice.family, choice.measured_on, choice.exact) == ("chen_general", A.key, False)
    assert choice.problem == NEW
    assert space("chen_general", NEW).is_valid(choice.config)
    # The nearest valid config of the neighbour's best (itself, when it is valid here).
    stored = config_of("chen_general", A, 3)
    if space("chen_general", NEW).is_valid(stored):
        assert choice.config == stored
    # Then the neighbour's other families, then farther shapes.
    rest = [(c.family, c.measured_on) for c in found]
    assert rest[0] == ("implicit_gemm", A.key)
    assert ("implicit_gemm", A_FAR.key) in rest


def test_error_and_nearest_policies_on_a_miss(synthetic):
    synthetic.record("chen_general", A, config_of("chen_general", A), 0.015)
    catalogue = synthetic.catalogue()
    _, found = resolve(catalogue, NEW, LIMITS, "error")
    assert list(found) == []
    assert "on_miss='error'" in catalogue.miss_reason(NEW, "error")
    # A stored shape is served under every policy, and tuning is never asked for.
    for policy in ("nearest", "tune", "error"):
        _, found = resolve(catalogue, A, LIMITS, policy, tune=pytest.fail)
        assert next(found).exact
    with pytest.raises(ValueError, match="on_miss"):
        resolve(catalogue, A, LIMITS, "guess")


def test_tune_policy_tunes_the_missing_shape_then_serves_what_it_stored(synthetic):
    synthetic.record("chen_general", A, config_of("chen_general", A), 0.015)
    tuned = []

    def tune(problems):
        tuned.append(problems)
        problem = problems[0]
        synthetic.record("implicit_gemm", problem, config_of("implicit_gemm", problem, 2), 0.5)
        synthetic.record("chen_general", problem, config_of("chen_general", problem, 1), 0.4)
        return synthetic.catalogue()

    catalogue, found = resolve(synthetic.catalogue(), NEW, LIMITS, "tune", tune)
    # Every problem that may serve the call: FP32 in both layouts.
    assert tuned == [[NEW, replace(NEW, layout="NHWC")]]
    choices = list(found)
    assert [(c.family, c.exact) for c in choices] == [
        ("chen_general", True),
        ("implicit_gemm", True),
    ]
    assert choices[0].config == config_of("chen_general", NEW, 1)
    # Read again, the store serves it without tuning.
    _, found = resolve(catalogue, NEW, LIMITS, "tune", tune=pytest.fail)
    assert next(found).family == "chen_general"


def test_tuning_that_stores_nothing_verified_is_a_miss(synthetic):
    def tune(problems):
        problem = problems[0]
        config = config_of("chen_general", problem)
        synthetic.record("chen_general", problem, config, 0.1, Status.WRONG_RESULT)
        return synthetic.catalogue()

    catalogue, found = resolve(synthetic.catalogue(), NEW, LIMITS, "tune", tune)
    assert list(found) == []
    assert "stored no verified" in catalogue.miss_reason(NEW, "tune")


def test_an_empty_store_is_a_miss_for_every_policy(synthetic):
    catalogue = synthetic.catalogue()
    for policy in ("nearest", "error"):
        assert list(resolve(catalogue, NEW, LIMITS, policy)[1]) == []
    assert "no verified" in catalogue.miss_reason(NEW, "nearest")


def test_a_shape_measured_only_with_a_kernels_previous_code_is_a_miss_that_says_remeasure(
    synthetic,
):
    # A store tuned before the kernel changed, read as the runtime reads it (current code only).
    fused = replace(A, dtype="bf16", layout="NHWC", epilogue="bias_relu")
    synthetic.record("implicit_gemm", A, config_of("implicit_gemm", A), 0.020, digest="old")
    synthetic.record("tc_wgmma", fused, config_of("tc_wgmma", fused), 0.010, digest="old")
    synthetic.store.read_current({"implicit_gemm": "new", "tc_wgmma": "new"})
    catalogue = synthetic.catalogue()
    assert list(resolve(catalogue, A, LIMITS, "error")[1]) == []
    for problem in (A, fused, replace(fused, epilogue="")):
        assert "`autotune remeasure`" in catalogue.miss_reason(problem, "nearest"), problem
    assert "remeasure" in catalogue.miss_reason(NEW, "nearest")  # nothing current at all
    # Once a shape has a measurement of the current code, the others still say remeasure.
    synthetic.record("implicit_gemm", A, config_of("implicit_gemm", A), 0.025, digest="new")
    catalogue = synthetic.catalogue()
    assert [c.family for c in catalogue.stored(A)] == ["implicit_gemm"]
    assert "`autotune remeasure`" in catalogue.miss_reason(fused, "nearest")
    assert "remeasure" not in catalogue.miss_reason(NEW, "error")


def test_a_store_read_whole_never_says_remeasure(synthetic):
    synthetic.record("implicit_gemm", A, config_of("implicit_gemm", A), 0.020, digest="old")
    catalogue = synthetic.catalogue()  # no read_current: every code's rows count
    assert [c.family for c in catalogue.stored(A)] == ["implicit_gemm"]
    assert "remeasure" not in catalogue.miss_reason(NEW, "error")


def test_which_families_the_runtime_can_call():
    assert callable_family(FAMILIES["implicit_gemm"], A) is None
    assert callable_family(FAMILIES["smem_channels"], A) is None  # its bias is passed as zeros
    assert callable_family(FAMILIES["maxdnn"], LAYER) is None  # converts its layouts per call
    assert callable_family(FAMILIES["chen_special"], A) is not None  # C = 1 only
    assert callable_family(FAMILIES["chen_special"], ConvProblem(N=64, K=3, C=1, F=4)) is None
    assert "not a 2D convolution" in callable_family(FAMILIES["conv3d"], A)
    assert "not a 2D convolution" in callable_family(FAMILIES["sgemm"], A)


def test_a_family_left_out_of_the_runtime_is_never_chosen(synthetic):
    synthetic.record("chen_general", A, config_of("chen_general", A), 0.015)
    synthetic.record("implicit_gemm", A, config_of("implicit_gemm", A), 0.020)
    only = {"implicit_gemm": FAMILIES["implicit_gemm"]}
    catalogue = synthetic.catalogue(families=only)
    assert [c.family for c in catalogue.stored(A)] == ["implicit_gemm"]
    (refused,) = catalogue.refusals(A)
    assert refused.family == "chen_general" and "not among the families" in refused.reason


def test_a_call_with_a_bias_prices_the_pass_a_family_that_does_not_fuse_it_costs():
    from autotune.runtime.calls import Request, epilogue_pass_bytes
    from autotune.runtime.lookup import Stored

    # ResNet-50's layer1 1x1 shape in bf16 and the two tensor-core families' bests on the
    # H200: tc_implicit_gemm faster by 1.8 us, but it leaves the bias to a pass of its own.
    sizes = ConvProblem(N=56, K=1, C=64, F=64, B=32)
    problem = replace(sizes, dtype="bf16", layout="NHWC")
    rows = [
        (problem, Stored("tc_implicit_gemm", config_of("tc_implicit_gemm", problem), 0.0144)),
        (problem, Stored("tc_wgmma", config_of("tc_wgmma", problem), 0.0162)),
    ]
    catalogue = Catalogue(rows, copy_gbps=4000.0)
    limits = ARCH_LIMITS["sm_90"]
    plain = list(catalogue.for_call(sizes, Request("bfloat16", "NHWC"), limits))
    assert [c.family for c in plain] == ["tc_implicit_gemm", "tc_wgmma"]
    assert all(c.epilogue_ms == 0 for c in plain)
    biased = list(catalogue.for_call(sizes, Request("bfloat16", "NHWC", epilogue="bias"), limits))
    assert [c.family for c in biased] == ["tc_wgmma", "tc_implicit_gemm"]
    assert biased[0].epilogue_ms == 0  # fused in its store
    pass_ms = epilogue_pass_bytes(problem) / 4e12 * 1e3 + 0.002
    assert biased[1].epilogue_ms == pytest.approx(pass_ms)
    assert biased[1].expected_ms == pytest.approx(0.0144 + biased[1].untimed_ms + pass_ms)


def test_a_residual_the_family_does_not_fuse_is_priced_as_one_more_read():
    from autotune.runtime.calls import Request, epilogue_pass_bytes
    from autotune.runtime.lookup import Stored

    sizes = ConvProblem(N=56, K=1, C=64, F=64, B=32)
    problem = replace(sizes, dtype="bf16", layout="NHWC")
    rows = [(problem, Stored("tc_implicit_gemm", config_of("tc_implicit_gemm", problem), 0.0144))]
    catalogue = Catalogue(rows, copy_gbps=4000.0)
    request = Request("bfloat16", "NHWC", epilogue="bias_add_relu")
    (choice,) = catalogue.for_call(sizes, request, ARCH_LIMITS["sm_90"])
    assert epilogue_pass_bytes(problem, True) == 3 * epilogue_pass_bytes(problem) // 2
    assert choice.epilogue_ms == pytest.approx(
        epilogue_pass_bytes(problem, True) / 4e12 * 1e3 + 0.002
    )


def test_without_a_copy_bandwidth_plans_paying_the_same_copies_rank_by_their_runs():
    from autotune.runtime.calls import Request
    from autotune.runtime.lookup import Stored

    # ResNet-50 in tf32 on the H200, its store tuned without the device's ceilings: an NCHW call
    # pays unpriced layout copies with either tensor-core family (both read NHWC). The first
    # stored session ranked them by name (tc_implicit_gemm, 1.2-1.7x slower, and its bias a
    # pass of its own); the run times and the unpriced costs' count decide instead.
    limits = ARCH_LIMITS["sm_90"]
    times = {
        ConvProblem(N=56, K=3, C=64, F=64, B=32): {"tc_implicit_gemm": 0.0527, "tc_wgmma": 0.0426},
        ConvProblem(N=56, K=1, C=64, F=256, B=32): {"tc_implicit_gemm": 0.0457, "tc_wgmma": 0.0773},
    }
    rows = []
    for sizes, by_family in times.items():
        problem = replace(sizes, dtype="tf32", layout="NHWC")
        rows += [(problem, Stored(f, config_of(f, problem), t)) for f, t in by_family.items()]
    catalogue = Catalogue(rows, copy_gbps=None)
    a, b = times

    def order(sizes, request):
        return [c.family for c in catalogue.for_call(sizes, request, limits)]

    plain = Request("float32", "NCHW", allow_tf32=True)
    assert order(a, plain) == ["tc_wgmma", "tc_implicit_gemm"]
    assert order(b, plain) == ["tc_implicit_gemm", "tc_wgmma"]
    # With a bias: the family that fuses it has one unpriced cost, the other two.
    assert order(b, replace(plain, epilogue="bias")) == ["tc_wgmma", "tc_implicit_gemm"]


def test_a_best_measured_with_the_calls_epilogue_fused_stands_in_for_the_plain_one():
    from autotune.runtime.calls import Request
    from autotune.runtime.lookup import Stored

    # ResNet-50's conv3 at 56x56 in tf32 on the H200: its plain best ran 6x slower called with
    # the residual add and ReLU in its store; another configuration measured fused is faster.
    sizes = ConvProblem(N=56, K=1, C=64, F=256, B=32)
    problem = replace(sizes, dtype="tf32", layout="NHWC")
    fused = replace(problem, epilogue="bias_add_relu")
    plain_cfg, fused_cfg = config_of("tc_wgmma", problem), config_of("tc_wgmma", problem, 1)
    assert plain_cfg != fused_cfg
    rows = [
        (problem, Stored("tc_wgmma", plain_cfg, 0.065)),
        (fused, Stored("tc_wgmma", fused_cfg, 0.108)),
        (problem, Stored("tc_implicit_gemm", config_of("tc_implicit_gemm", problem), 0.046)),
    ]
    catalogue = Catalogue(rows, copy_gbps=4000.0)
    limits = ARCH_LIMITS["sm_90"]
    request = Request("float32", "NHWC", allow_tf32=True, epilogue="bias_add_relu")
    wgmma = next(c for c in catalogue.for_call(sizes, request, limits) if c.family == "tc_wgmma")
    assert (wgmma.config, wgmma.time_ms, wgmma.measured_on) == (fused_cfg, 0.108, fused.key)
    assert wgmma.problem == problem  # the call's plain problem: the runtime adds the epilogue
    assert wgmma.exact  # measured on this very shape, fused
    plain = Request("float32", "NHWC", allow_tf32=True)
    wgmma = next(c for c in catalogue.for_call(sizes, plain, limits) if c.family == "tc_wgmma")
    assert (wgmma.config, wgmma.time_ms) == (plain_cfg, 0.065)
    # For another shape's call (rule 2), a family measured both ways at a shape is compared
    # by its plain measurement there.
    other = ConvProblem(N=28, K=1, C=64, F=256, B=32, dtype="tf32", layout="NHWC")
    table = catalogue.table(other)
    assert fused.key not in table
    assert table[problem.key][1]["tc_wgmma"].time_ms == 0.065
    assert not table[problem.key][1]["tc_wgmma"].measured_on


def test_a_plain_call_of_a_shape_measured_only_fused_gets_the_fused_measurement():
    """tune_model tunes tc_wgmma only with the model's epilogue fused: a plain call of the same
    sizes is served by that configuration (rule 1, measured on this very shape), ranked by
    its fused time, where before only tc_implicit_gemm's plain best could serve it (ResNet-50's
    bf16 shapes through `bench dispatch`: 0.51-0.91x cuDNN's speed, session 50)."""
    from autotune.runtime.calls import Request
    from autotune.runtime.lookup import Stored

    plain = ConvProblem(N=28, K=1, C=128, F=512, B=32, dtype="bf16", layout="NHWC")
    fast = replace(plain, epilogue="bias_add_relu")
    slow = replace(plain, epilogue="bias")
    rows = [
        (fast, Stored("tc_wgmma", config_of("tc_wgmma", fast), 0.016)),
        (slow, Stored("tc_wgmma", config_of("tc_wgmma", slow, 1), 0.018)),
        (plain, Stored("tc_implicit_gemm", config_of("tc_implicit_gemm", plain), 0.024)),
    ]
    catalogue = Catalogue(rows, copy_gbps=4000.0)
    sizes = replace(plain, dtype="fp32", layout="NCHW")
    first, second = list(catalogue.for_call(sizes, Request("bfloat16", "NHWC"), LIMITS))[:2]
    assert (first.family, first.time_ms, first.measured_on) == ("tc_wgmma", 0.016, fast.key)
    assert first.config == config_of("tc_wgmma", fast) and first.exact
    assert first.problem == plain  # a plain plan: the call fuses nothing
    assert second.family == "tc_implicit_gemm"
    # A call with a bias takes the measurement with its own epilogue, not the faster other one.
    biased = Request("bfloat16", "NHWC", epilogue="bias")
    first = next(catalogue.for_call(sizes, biased, LIMITS))
    assert (first.family, first.time_ms, first.measured_on) == ("tc_wgmma", 0.018, slow.key)


def test_a_family_measured_only_fused_is_evidence_and_a_configuration_for_unseen_calls():
    """A store that tune_model filled: tc_wgmma measured only with a model's epilogues fused,
    tc_implicit_gemm (which fuses none) plain, on ResNet-50's 3x3 layers in bf16. An unseen
    plain call of VGG-16's (H200, 2026-11-30: 1.75x the tuned best's time, the median over its
    shapes, when the fused measurements were left out and only tc_implicit_gemm had evidence)
    is served by tc_wgmma, its configuration borrowed from the nearest fused measurement."""
    from autotune.runtime.calls import Request
    from autotune.runtime.lookup import Stored

    rows = []
    for n, c in ((56, 64), (28, 128), (14, 256)):
        plain = ConvProblem(N=n, K=3, C=c, F=c, B=32, dtype="bf16", layout="NHWC")
        for epilogue, time_ms in (("bias_relu", 0.030), ("bias_add_relu", 0.031)):
            fused = replace(plain, epilogue=epilogue)
            rows.append((fused, Stored("tc_wgmma", config_of("tc_wgmma", fused), time_ms)))
        implicit = config_of("tc_implicit_gemm", plain)
        rows.append((plain, Stored("tc_implicit_gemm", implicit, 0.045)))
    catalogue = Catalogue(rows, copy_gbps=4000.0)
    unseen = ConvProblem(N=56, K=3, C=128, F=256, B=32, dtype="bf16", layout="NHWC")
    table = catalogue.table(unseen)
    assert len(table) == 3  # the three plain shapes, fused measurements in their rows
    from autotune.strategies.transfer import shape_distance

    nearest = min((shape for shape, _ in table.values()), key=lambda p: shape_distance(unseen, p))
    wgmma = table[nearest.key][1]["tc_wgmma"]
    # The fastest of its fused measurements stands for it.
    assert (wgmma.time_ms, wgmma.measured_on) == (0.030, replace(nearest, epilogue="bias_relu").key)
    choice = next(
        catalogue.for_call(
            replace(unseen, dtype="fp32", layout="NCHW"), Request("bfloat16", "NHWC"), LIMITS
        )
    )
    assert choice.family == "tc_wgmma" and not choice.exact
    assert choice.problem == unseen  # a plain plan: the call fuses nothing
    assert choice.measured_on == replace(nearest, epilogue="bias_relu").key
    assert space("tc_wgmma", unseen).is_valid(choice.config)
