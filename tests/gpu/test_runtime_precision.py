"""On a CUDA device with PyTorch: every dtype and layout the runtime serves (FP32 with TF32 off
or allowed, BF16, FP16; contiguous and channels-last) against float64, the output in the input's
memory format and no layout copy where the plan reads the input's layout; the custom op under
torch.compile(fullgraph=True), in a captured CUDA graph and under mode="reduce-overhead";
optimize() leaving nothing to compile or prepare at the first forward; and torch.autocast's
lower precision taken as PyTorch's conv2d takes it. Each with both of the
runtime's launchers (CuPy's kernel call and cuLaunchKernel directly)."""

from __future__ import annotations

import pytest

from autotune.gpu.timing import TimingPolicy
from autotune.model.precision import PRECISIONS
from autotune.runtime.calls import LAUNCHER_NAMES

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

QUICK = TimingPolicy(warmup=1, min_repeats=3, min_time_s=0.0, max_repeats=5, max_time_s=0.5)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# (storage, input layout, TF32 allowed): every kind of call served.
CASES = [
    (storage, layout, tf32)
    for storage, tf32s in (
        ("float32", (True, False)),  # TF32 first: its calls tune both dtypes, FP32's then none
        ("bfloat16", (False,)),
        ("float16", (False,)),
    )
    for tf32 in tf32s
    for layout in ("NCHW", "NHWC")
]
# The dtypes a plan serving each kind of call may compute.
ALLOWED = {
    ("float32", False): {"fp32"},
    ("float32", True): {"fp32", "tf32"},
    ("bfloat16", False): {"bf16"},
    ("float16", False): {"fp16"},
}
# Channels a multiple of 8 (whole 16-byte chunks of 16-bit data) and odd ones (the gather path).
SHAPES = [
    dict(B=2, C=16, H=14, F=32, K=3, stride=1, padding=1),
    dict(B=3, C=12, H=9, F=20, K=1, stride=2, padding=0),
    # Stride 2 over an even side: the padding's last row is in no window (a tail), read in place.
    # (C = 24: prepared_choice tells calls apart by B, C and H.)
    dict(B=2, C=24, H=14, F=40, K=3, stride=2, padding=1),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A runtime whose store was filled by on_miss="tune" for every kind of call and shape."""
    from autotune.runtime import Runtime

    database = str(tmp_path_factory.mktemp("precision") / "runtime.db")
    cache = tmp_path_factory.mktemp("cubins")
    rt = Runtime(database, cache_dir=cache, tune_budget=3, tune_timing=QUICK)
    for storage, layout, tf32 in CASES:
        for shape in SHAPES:
            with allow_tf32(tf32):
                x, w = inputs(shape, storage, layout, 0)
                rt.conv2d(x, w, shape["stride"], shape["padding"], "tune")
    torch.cuda.synchronize()
    return rt, cache


@pytest.fixture(scope="module", params=LAUNCHER_NAMES)
def tuned(store, request):
    """A runtime over that store for each way of launching: every test runs with both."""
    from autotune.runtime import Runtime

    rt, cache = store
    if request.param == rt.launcher:
        return rt
    return Runtime(rt.database, cache_dir=cache, launcher=request.param)


class allow_tf32:
    def __init__(self, allowed: bool) -> None:
        self.allowed = allowed

    def __enter__(self):
        self.before = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = self.allowed

    def __exit__(self, *exc):
        torch.backends.cudnn.allow_tf32 = self.before


def inputs(shape, storage, layout, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.rand(shape["B"], shape["C"], shape["H"], shape["H"], device="cuda", generator=g)
    w = torch.rand(shape["F"], shape["C"], shape["K"], shape["K"], device="cuda", generator=g)
    x, w = (x * 2 - 1).to(DTYPES[storage]), (w * 2 - 1).to(DTYPES[storage])
    if layout == "NHWC":
        x = x.contiguous(memory_format=torch.channels_last)
        w = w.contiguous(memory_format=torch.channels_last)
    return x, w


def rel_error(y, x, w, shape) -> float:
    ref = torch.nn.functional.conv2d(
        x.double(), w.double(), stride=shape["stride"], padding=shape["padding"]
    )
    assert tuple(y.shape) == tuple(ref.shape)
    return (torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref)).item()


def prepared_choice(rt, x, storage, layout, tf32, epilogue=""):
    found = [
        c
        for call, c in rt.prepared().items()
        if (call.storage, call.layout, call.allow_tf32, call.B, call.C, call.H, call.epilogue)
        == (storage, layout, tf32, *x.shape[:3], epilogue)
    ]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("storage, layout, tf32", CASES)
@pytest.mark.parametrize("shape", SHAPES, ids=["3x3", "1x1-s2", "3x3-s2-tail"])
def test_every_dtype_and_layout_matches_float64(tuned, storage, layout, tf32, shape):
    x, w = inputs(shape, storage, layout, 7)
    with allow_tf32(tf32):
        y = tuned.conv2d(x, w, shape["stride"], shape["padding"], "error")
    torch.cuda.synchronize()
    choice = prepared_choice(tuned, x, storage, layout, tf32)
    assert choice.problem.dtype in ALLOWED[(storage, tf32)]
    assert y.dtype is x.dtype
    wanted = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    assert y.is_contiguous(memory_format=wanted)
    tolerance = PRECISIONS[choice.problem.dtype].tolerance
    assert rel_error(y, x, w, shape) <= tolerance, (choice.family, choice.problem.key)


@pytest.mark.parametrize("storage, layout, tf32", CASES)
@pytest.mark.parametrize("shape", SHAPES, ids=["3x3", "1x1-s2", "3x3-s2-tail"])
def test_a_bias_is_added_in_the_store_where_the_family_fuses_it(
    tuned, storage, layout, tf32, shape
):
    from autotune.families import get_family
    from autotune.runtime.calls import Call

    x, w = inputs(shape, storage, layout, 17)
    g = torch.Generator(device="cuda").manual_seed(18)
    bias = (torch.rand(shape["F"], device="cuda", generator=g) * 4 - 2).to(x.dtype)
    with allow_tf32(tf32):
        y = tuned.conv2d(x, w, shape["stride"], shape["padding"], "error", bias)
    torch.cuda.synchronize()
    wanted = (storage, layout, tf32, *x.shape[:3], "bias")
    calls = {Call.of(key): e for key, e in tuned.entries.items()}
    (entry,) = [
        e
        for c, e in calls.items()
        if (c.storage, c.layout, c.allow_tf32, c.B, c.C, c.H, c.epilogue) == wanted
    ]
    family = get_family(entry.choice.family)
    assert entry.epilogue == ("bias" if "bias" in family.epilogues else "")
    ref = torch.nn.functional.conv2d(
        x.double(), w.double(), bias.double(), stride=shape["stride"], padding=shape["padding"]
    )
    err = (torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref)).item()
    tolerance = PRECISIONS[entry.choice.problem.dtype].tolerance
    assert err <= tolerance, (entry.choice.family, entry.epilogue, err)


def test_tc_wgmma_adds_the_bias_in_its_store(tuned):
    from autotune.runtime import Runtime

    shape = SHAPES[0]
    rt = Runtime(tuned.database, families=["tc_wgmma"], launcher=tuned.launcher)
    x, w = inputs(shape, "bfloat16", "NHWC", 19)
    bias = torch.linspace(-1, 1, shape["F"], device="cuda", dtype=torch.bfloat16)
    y = rt.conv2d(x, w, shape["stride"], shape["padding"], "nearest", bias)
    rt.conv2d(x, w, shape["stride"], shape["padding"], "nearest")
    torch.cuda.synchronize()
    assert {e.epilogue for e in rt.entries.values()} == {"bias", ""}
    ref = torch.nn.functional.conv2d(
        x.double(), w.double(), bias.double(), stride=shape["stride"], padding=shape["padding"]
    )
    err = (torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref)).item()
    assert err <= PRECISIONS["bf16"].tolerance  # rounded once, after the bias


def test_an_input_at_an_unaligned_address_is_served(tuned):
    # A slice of a larger tensor: tensor maps and the padding's 16-byte chunks would fault on it.
    shape = SHAPES[0]
    x, w = inputs(shape, "bfloat16", "NHWC", 21)
    flat = torch.empty(x.numel() + 1, dtype=x.dtype, device="cuda")
    moved = flat[1:].as_strided(x.shape, x.stride())
    moved.copy_(x)
    assert moved.data_ptr() % 16 and moved.is_contiguous(memory_format=torch.channels_last)
    y = tuned.conv2d(moved, w, shape["stride"], shape["padding"], "error")
    torch.cuda.synchronize()
    assert rel_error(y, x, w, shape) <= PRECISIONS["bf16"].tolerance


def test_a_plan_of_the_inputs_layout_copies_nothing(tuned):
    shape = SHAPES[0]
    x, w = inputs(shape, "bfloat16", "NHWC", 3)
    tuned.conv2d(x, w, shape["stride"], shape["padding"], "error")  # prepared
    assert prepared_choice(tuned, x, "bfloat16", "NHWC", False).problem.nhwc
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        tuned.conv2d(x, w, shape["stride"], shape["padding"], "error")
    names = {e.name for e in prof.events()}
    assert not names & {"aten::copy_", "aten::clone", "aten::contiguous"}, names


class Small(torch.nn.Module):
    def __init__(self, rt) -> None:
        from autotune.runtime import Conv2d

        super().__init__()
        self.a = Conv2d(16, 32, 3, padding=1, runtime_=rt, device="cuda")
        self.b = Conv2d(32, 32, 3, padding=1, bias=False, runtime_=rt, device="cuda")

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def small_model(rt, dtype=torch.bfloat16):
    return Small(rt).to(dtype=dtype, memory_format=torch.channels_last).eval()


def test_the_op_compiles_fullgraph_with_inductor(tuned):
    model = small_model(tuned)
    x = inputs(SHAPES[0], "bfloat16", "NHWC", 5)[0]
    with torch.no_grad():
        eager = model(x)
        compiled = torch.compile(model, fullgraph=True)(x)
    torch.cuda.synchronize()
    assert torch.allclose(compiled.float(), eager.float(), rtol=2e-2, atol=2e-2)


def test_an_eager_layer_calls_the_runtime_without_the_op(tuned, monkeypatch):
    # The custom op's dispatch costs host time per call: run eagerly, a layer skips it.
    from autotune.runtime import torch_layer

    def no_op(*args):
        raise AssertionError("an eager forward on the GPU went through the custom op")

    model = small_model(tuned)
    x = inputs(SHAPES[0], "bfloat16", "NHWC", 4)[0]
    with torch.no_grad():
        before = model(x)
        monkeypatch.setattr(torch_layer.torch_op, "conv2d", no_op)
        after = model(x)
    torch.cuda.synchronize()
    assert torch.equal(before, after)


def test_the_op_runs_in_a_captured_cuda_graph(tuned):
    model = small_model(tuned)
    static = inputs(SHAPES[0], "bfloat16", "NHWC", 6)[0]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(2):  # warm-up: every shape prepared before capture
            model(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        out = model(static)
    fresh = inputs(SHAPES[0], "bfloat16", "NHWC", 8)[0]
    static.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        expected = model(fresh)
    assert torch.equal(out, expected)  # the same kernels on the same data


def test_an_unprepared_shape_is_refused_during_capture(tuned):
    from autotune.runtime.calls import CallError

    model = small_model(tuned)
    x = inputs(dict(SHAPES[0], H=11), "bfloat16", "NHWC", 9)[0]  # never called before
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(Exception) as err:
        with torch.no_grad(), torch.cuda.graph(graph):
            model(x)
    chain = [err.value, err.value.__context__, err.value.__cause__]
    assert any(isinstance(e, CallError) and "not prepared" in str(e) for e in chain)


def test_reduce_overhead_mode_matches_eager(tuned):
    model = small_model(tuned)
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    x = inputs(SHAPES[0], "bfloat16", "NHWC", 10)[0]
    with torch.no_grad():
        eager = model(x).clone()
        for _ in range(3):  # warm-up runs, then recorded and replayed graphs
            y = compiled(x).clone()
    torch.cuda.synchronize()
    assert torch.allclose(y.float(), eager.float(), rtol=2e-2, atol=2e-2)


def test_after_optimize_the_first_forward_prepares_nothing(tuned, monkeypatch):
    import autotune.runtime.dispatch as dispatch
    from autotune.runtime.models import optimize

    model = torch.nn.Sequential(
        torch.nn.Conv2d(16, 32, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1),
    ).cuda()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    model = model.to(dtype=torch.bfloat16, memory_format=torch.channels_last).eval()
    x = inputs(SHAPES[0], "bfloat16", "NHWC", 12)[0]
    with torch.no_grad():
        eager = model(x).float()
    run = optimize(model, x, runtime_=tuned)
    assert isinstance(model[1], torch.nn.Identity)  # folded
    assert isinstance(run, torch.fx.GraphModule)  # the ReLU fused into the first convolution

    def no_build(*args, **kwargs):
        raise AssertionError("a plan was built at the first forward")

    monkeypatch.setattr(dispatch, "build_entry", no_build)
    with torch.no_grad():
        y = run(x).float()
    torch.cuda.synchronize()
    err = (torch.linalg.vector_norm(y - eager) / torch.linalg.vector_norm(eager)).item()
    assert err <= 2e-2  # bf16 folded and fused against bf16 unfolded


@pytest.mark.parametrize("storage, layout, tf32", CASES)
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_a_residual_and_an_activation_are_applied_where_the_family_fuses_them(
    tuned, storage, layout, tf32, activation
):
    from autotune.families import get_family
    from autotune.runtime.calls import Call

    shape = SHAPES[0]
    x, w = inputs(shape, storage, layout, 23)
    g = torch.Generator(device="cuda").manual_seed(24)
    bias = (torch.rand(shape["F"], device="cuda", generator=g) - 0.5).to(x.dtype)
    out_shape = (shape["B"], shape["F"], shape["H"], shape["H"])  # 3x3, padding 1, stride 1
    residual = (torch.rand(out_shape, device="cuda", generator=g) * 4 - 2).to(x.dtype)
    if layout == "NHWC":
        residual = residual.contiguous(memory_format=torch.channels_last)
    with allow_tf32(tf32):
        y = tuned.conv2d(x, w, 1, 1, "error", bias, residual, activation)
    torch.cuda.synchronize()
    name = f"bias_add_{activation}"
    calls = {Call.of(key): e for key, e in tuned.entries.items()}
    (entry,) = [
        e
        for c, e in calls.items()
        if (c.storage, c.layout, c.allow_tf32, c.C, c.epilogue) == (storage, layout, tf32, 16, name)
    ]
    assert entry.epilogue == (name if name in get_family(entry.choice.family).epilogues else "")
    conv = torch.nn.functional.conv2d(x.double(), w.double(), bias.double(), padding=1)
    act = torch.relu if activation == "relu" else torch.nn.functional.gelu
    ref = act(conv + residual.double())
    err = (torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref)).item()
    assert err <= PRECISIONS[entry.choice.problem.dtype].tolerance, (entry.choice.family, err)


def test_a_tf32_call_of_tc_wgmma_stores_tf32_exact_outputs(tuned):
    """The output is rounded to TF32 for the next layer's tensor cores, which would truncate it."""
    from autotune.runtime import Runtime

    rt = Runtime(
        tuned.database, families=["tc_wgmma"], cache_dir=tuned.cache_dir, launcher=tuned.launcher
    )
    shape = SHAPES[0]
    x, w = inputs(shape, "float32", "NHWC", 21)
    with allow_tf32(True):
        y = rt.conv2d(x, w, shape["stride"], shape["padding"], "nearest")
    torch.cuda.synchronize()
    choice = prepared_choice(rt, x, "float32", "NHWC", True)
    assert (choice.family, choice.problem.dtype) == ("tc_wgmma", "tf32")
    assert not (y.view(torch.int32) & 0x1FFF).any()  # the low 13 bits, which TF32 lacks
    assert rel_error(y, x, w, shape) <= PRECISIONS["tf32"].tolerance


def test_a_layer_computes_with_its_weight_rounded_to_tf32_where_tf32_is_allowed(tuned):
    from autotune.runtime.torch_layer import Conv2d, tf32_rounded

    shape = SHAPES[0]
    x, w = inputs(shape, "float32", "NHWC", 22)
    layer = Conv2d(
        shape["C"], shape["F"], shape["K"], padding=shape["padding"], bias=False, runtime_=tuned
    )
    layer._adopt(w, None)
    with allow_tf32(True), torch.no_grad():
        assert torch.equal(layer(x), tuned.conv2d(x, tf32_rounded(w), 1, shape["padding"]))
    with allow_tf32(False), torch.no_grad():
        assert torch.equal(layer(x), tuned.conv2d(x, w, 1, shape["padding"]))


def test_optimize_over_a_store_without_this_device_says_to_tune_first(tmp_path):
    from autotune.runtime.lookup import LookupMiss
    from autotune.runtime.models import optimize

    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1)).cuda().eval()
    x = torch.randn(2, 8, 12, 12, device="cuda").to(memory_format=torch.channels_last)
    with pytest.raises(LookupMiss, match="tune-model --model NAME --dtype (fp32|tf32)"):
        optimize(model, x, database=str(tmp_path / "empty.db"))


# Only the tensor-core families (NHWC): an NCHW call would copy its layout at every layer.
TENSOR_CORE_FAMILIES = ["tc_wgmma", "tc_implicit_gemm"]


def tensor_core_runtime_and_model(tuned):
    """A runtime over the store of `tuned` with the tensor-core families only, and an fp32
    NCHW model of two convolutions with a ReLU between them."""
    from autotune.runtime import Runtime

    rt = Runtime(
        tuned.database,
        families=TENSOR_CORE_FAMILIES,
        cache_dir=tuned.cache_dir,
        launcher=tuned.launcher,
    )
    model = torch.nn.Sequential(
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1),
    )
    return rt, model.cuda().eval()


def test_an_nchw_model_served_by_nhwc_plans_runs_channels_last_inside(tuned):
    from autotune.runtime.model_tuning import tune_model
    from autotune.runtime.models import optimize

    # The store fixture tuned fp32 first, so its tf32 calls found fp32 stored and tuned no tf32:
    # tune this model's shapes in tf32 as a user would.
    rt, model = tensor_core_runtime_and_model(tuned)
    x = inputs(SHAPES[0], "float32", "NCHW", 13)[0]
    tune_model(model, x, "tf32", database=rt.database, budget=4, families=TENSOR_CORE_FAMILIES)
    with allow_tf32(True), torch.no_grad():
        ref = model.double()(x.double()).float()
        model.float()
        run = optimize(model, x, runtime_=rt)
        y = run(x)
    torch.cuda.synchronize()
    assert isinstance(run, torch.fx.GraphModule)
    calls = list(rt.prepared())
    assert calls and all(call.layout == "NHWC" for call in calls)  # no copy per layer
    assert all(choice.layout_ms == 0 for choice in rt.prepared().values())
    assert y.is_contiguous()  # given back in the caller's format
    err = (torch.linalg.vector_norm(y - ref) / torch.linalg.vector_norm(ref)).item()
    assert err <= 5e-3  # TF32 products


def autocast_reference(model, x):
    """The small model's forward as torch.nn.Conv2d layers compute it under the same autocast."""
    F = torch.nn.functional
    a = F.conv2d(x, model.a.weight, model.a.bias, padding=1)
    return F.conv2d(torch.relu(a), model.b.weight, None, padding=1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_under_autocast_the_layers_compute_in_its_dtype_as_pytorchs(tuned, dtype):
    model = small_model(tuned, dtype=torch.float32)
    x = inputs(SHAPES[0], "float32", "NHWC", 13)[0]
    with torch.no_grad(), torch.autocast("cuda", dtype=dtype):
        y = model(x)
        again = model(x)
        expected = autocast_reference(model, x)
    torch.cuda.synchronize()
    storage = {torch.bfloat16: "bfloat16", torch.float16: "float16"}[dtype]
    assert y.dtype is dtype and expected.dtype is dtype
    assert y.is_contiguous(memory_format=torch.channels_last)
    choice = prepared_choice(tuned, x.to(dtype), storage, "NHWC", False, "bias")
    assert choice.problem.dtype == {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    assert torch.equal(again, y)
    cast = model.a._casts[dtype][2]
    assert cast.dtype is dtype and model.a._cast_parameters(dtype)[0] is cast  # cast once
    err = torch.linalg.vector_norm((y - expected).float()) / torch.linalg.vector_norm(expected)
    assert err.item() <= 2e-2


def test_under_autocast_a_16_bit_input_meets_an_fp32_layer(tuned):
    # An fp32 layer after an op that autocast ran in bf16 (a Linear, a grouped convolution):
    # without autocast the dtypes disagree, which is refused; under it both are bf16.
    from autotune.runtime.calls import CallError

    model = small_model(tuned, dtype=torch.float32)
    x = inputs(SHAPES[0], "bfloat16", "NHWC", 14)[0]
    with torch.no_grad():
        with pytest.raises(CallError, match="both float32, bfloat16 or float16"):
            model(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = model(x)
    assert y.dtype is torch.bfloat16


def test_under_autocast_the_function_computes_as_pytorchs_conv2d(tuned, monkeypatch):
    import autotune
    from autotune.runtime import dispatch

    shape = SHAPES[0]
    x, w = inputs(shape, "float32", "NHWC", 15)
    monkeypatch.setitem(dispatch._RUNTIMES, tuned.database, tuned)  # autotune.conv2d's runtime
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = autotune.conv2d(x, w, 1, 1, database=tuned.database)
        expected = torch.nn.functional.conv2d(x, w, padding=1)
    torch.cuda.synchronize()
    assert y.dtype is torch.bfloat16 and expected.dtype is torch.bfloat16
    err = torch.linalg.vector_norm((y - expected).float()) / torch.linalg.vector_norm(expected)
    assert err.item() <= 2e-2


def test_under_autocast_the_model_compiles_fullgraph(tuned):
    model = small_model(tuned, dtype=torch.float32)
    x = inputs(SHAPES[0], "float32", "NHWC", 16)[0]
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        eager = model(x)
        compiled = torch.compile(model, fullgraph=True)(x)
    torch.cuda.synchronize()
    assert compiled.dtype is torch.bfloat16
    assert torch.allclose(compiled.float(), eager.float(), rtol=2e-2, atol=2e-2)


def test_optimize_inside_autocast_prepares_the_plans_of_its_dtype(tuned, monkeypatch):
    import autotune.runtime.dispatch as dispatch
    from autotune.runtime.model_tuning import tune_model
    from autotune.runtime.models import optimize

    rt, model = tensor_core_runtime_and_model(tuned)
    x = inputs(SHAPES[0], "float32", "NCHW", 17)[0]  # fp32 NCHW, as a mixed-precision user has
    tune_model(model, x, "bf16", database=rt.database, budget=4, families=TENSOR_CORE_FAMILIES)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        expected = model(x)
        run = optimize(model, x, runtime_=rt)

        def no_build(*args, **kwargs):
            raise AssertionError("a plan was built at the first forward")

        monkeypatch.setattr(dispatch, "build_entry", no_build)
        y = run(x)
    torch.cuda.synchronize()
    calls = list(rt.prepared())
    assert calls and all((c.storage, c.layout) == ("bfloat16", "NHWC") for c in calls)
    assert y.dtype is torch.bfloat16 and y.is_contiguous()  # the caller's format back
    err = torch.linalg.vector_norm((y - expected).float()) / torch.linalg.vector_norm(expected)
    assert err.item() <= 2e-2
