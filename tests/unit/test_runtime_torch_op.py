"""The custom op `torch.ops.autotune.conv2d` on the CPU (PyTorch's conv2d behind it): its schema
and fake implementation pass PyTorch's checks, its output keeps the input's memory format, and a
model of autotune.Conv2d layers compiles with fullgraph=True (no graph break). Skipped without
PyTorch (CI has none)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from autotune.runtime import torch_op  # noqa: E402
from autotune.runtime.torch_layer import Conv2d  # noqa: E402

F = torch.nn.functional


@pytest.fixture
def database(tmp_path):
    return str(tmp_path / "op.db")  # never opened: the CPU op runs PyTorch's conv2d


def channels_last(t):
    return t.contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_the_op_is_conv2d_in_the_inputs_memory_format(dtype, layout, database):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 11, 11, generator=g).to(dtype)
    w = torch.randn(7, 5, 3, 3, generator=g).to(dtype)
    if layout == "NHWC":
        x = channels_last(x)
    y = torch.ops.autotune.conv2d(x, w, None, None, 2, 1, "", "nearest", database)
    assert torch.equal(y, F.conv2d(x, w, stride=2, padding=1))
    assert y.shape == (2, 7, 6, 6) and y.dtype is dtype
    wanted = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    assert y.is_contiguous(memory_format=wanted)


def test_the_fake_gives_the_real_outputs_shape_and_strides(database):
    from torch._subclasses.fake_tensor import FakeTensorMode

    for x in (torch.randn(3, 4, 10, 10), channels_last(torch.randn(3, 4, 10, 10))):
        w = torch.randn(6, 4, 5, 5)
        real = torch.ops.autotune.conv2d(x, w, None, None, 1, 2, "", "nearest", database)
        with FakeTensorMode() as mode:
            fake = torch.ops.autotune.conv2d(
                mode.from_tensor(x), mode.from_tensor(w), None, None, 1, 2, "", "nearest", database
            )
        assert (fake.shape, fake.stride()) == (real.shape, real.stride())


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dims", [(3, 7, 5, 5), (2, 1, 4, 4), (1, 8, 1, 1), (1, 1, 1, 1)])
def test_the_output_has_torch_emptys_strides_in_its_memory_format(dims, layout):
    from autotune.runtime.torch_tensors import FORMATS, empty_like_layout

    x = torch.zeros(1, dtype=torch.bfloat16)
    for _ in range(2):  # the strides found, then reused
        out = empty_like_layout(x, dims, layout)
        wanted = torch.empty(dims, memory_format=FORMATS[layout])
        assert (out.shape, out.stride()) == (wanted.shape, wanted.stride())
        assert out.dtype is torch.bfloat16 and out.device == x.device


def test_a_graph_traced_with_dynamic_shapes_gets_the_same_strides(database):
    model = torch.nn.Sequential(Conv2d(4, 6, 3, padding=1, database=database), torch.nn.ReLU())
    compiled = torch.compile(model, dynamic=True, fullgraph=True)
    for batch in (2, 3):
        xb = channels_last(torch.randn(batch, 4, 9, 9))
        y = compiled(xb)
        assert y.stride() == model(xb).stride() and torch.allclose(y, model(xb))


def test_pytorchs_opcheck_passes(database):
    x = channels_last(torch.randn(2, 3, 8, 8))
    w = torch.randn(4, 3, 3, 3)
    torch.library.opcheck(torch_op.conv2d, (x, w, None, None, 1, 1, "", "nearest", database))
    bias, residual = torch.randn(4), channels_last(torch.randn(2, 4, 8, 8))
    args = (x, w, bias, residual, 1, 1, "relu", "nearest", database)
    torch.library.opcheck(torch_op.conv2d, args)


def test_the_op_applies_its_epilogue_after_the_convolution(database):
    g = torch.Generator().manual_seed(1)
    x = channels_last(torch.randn(2, 3, 9, 9, generator=g))
    w, bias = torch.randn(4, 3, 3, 3, generator=g), torch.randn(4, generator=g)
    residual = channels_last(torch.randn(2, 4, 9, 9, generator=g))
    y = torch.ops.autotune.conv2d(x, w, bias, residual, 1, 1, "relu", "nearest", database)
    expected = torch.relu(F.conv2d(x, w, bias, padding=1) + residual)
    assert torch.allclose(y, expected, atol=1e-6)
    assert y.is_contiguous(memory_format=torch.channels_last)


class Small(torch.nn.Module):
    def __init__(self, database: str) -> None:
        super().__init__()
        self.a = Conv2d(3, 8, 3, padding=1, database=database)
        self.b = Conv2d(8, 4, 1, stride=2, bias=False, database=database)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_a_model_of_autotune_layers_compiles_as_one_graph(database):
    model = Small(database).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        eager = model(x)
        explained = torch._dynamo.explain(model)(x)
        assert explained.graph_break_count == 0 and explained.graph_count == 1
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        assert torch.allclose(compiled(x), eager)
        assert torch.allclose(compiled(channels_last(x)), eager, atol=1e-6)


def test_a_layer_takes_the_dtype_of_its_weights_and_refuses_gradients(database):
    conv = torch.nn.Conv2d(3, 5, 3, padding=1).to(torch.bfloat16)
    layer = Conv2d.from_torch(conv, database=database)
    assert layer.weight.dtype is torch.bfloat16
    x = torch.randn(1, 3, 6, 6, dtype=torch.bfloat16)
    # The bias is added after the rounded convolution: within a bf16 step of PyTorch's fused one.
    assert torch.allclose(layer(x), conv(x).detach(), rtol=1e-2, atol=1e-2)
    with pytest.raises(RuntimeError, match="forward only"):
        layer(x.requires_grad_())


def test_fx_symbolic_tracing_records_the_op(database):
    # Traced (FX here; Dynamo is the test above), a layer is the custom op: one node that a
    # graph can hold, never the eager shortcut to the runtime.
    model = Small(database).eval()
    traced = torch.fx.symbolic_trace(model)
    targets = [n.target for n in traced.graph.nodes if n.op == "call_function"]
    assert sum(t is torch_op.conv2d or "autotune" in str(t) for t in targets) == 2, targets
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.allclose(traced(x), model(x))


def test_tf32_rounding_is_to_nearest_ties_away_and_keeps_the_memory_format():
    from autotune.runtime.torch_layer import tf32_rounded

    ulp = 2.0**-10  # TF32's last mantissa bit at 1.0
    x = torch.tensor([1 + ulp / 2, -(1 + ulp / 2), 1 + ulp / 4, 1 + 3 * ulp / 4, 1 + ulp])
    assert tf32_rounded(x).tolist() == [1 + ulp, -(1 + ulp), 1.0, 1 + ulp, 1 + ulp]
    w = channels_last(torch.randn(8, 3, 3, 3, generator=torch.Generator().manual_seed(1)))
    r = tf32_rounded(w)
    assert r.is_contiguous(memory_format=torch.channels_last)
    assert not (r.view(torch.int32) & 0x1FFF).any()
    assert ((r - w).abs() <= w.abs() * 2.0**-11).all()


def test_a_layer_keeps_its_fp32_weight_rounded_to_tf32_as_the_weight_changes(database):
    from autotune.runtime.torch_layer import tf32_rounded

    layer = Conv2d(3, 4, 3, database=database)
    assert torch.equal(layer.weight_tf32, tf32_rounded(layer.weight))
    assert "weight_tf32" not in layer.state_dict()  # derived, never saved
    ones = torch.full((4, 3, 3, 3), 1 + 2.0**-12)
    layer.load_state_dict({"weight": ones, "bias": torch.zeros(4)})  # copied in place
    assert torch.equal(layer.weight_tf32, torch.ones(4, 3, 3, 3))
    assert layer.to(torch.bfloat16).weight_tf32 is None  # only FP32 weights have one
    assert layer.float().weight_tf32 is not None
    # On the CPU PyTorch has no TF32: the weight as it is.
    assert layer._weight_for(torch.randn(1, 3, 5, 5)) is layer.weight


def test_an_eager_call_reads_the_parameters_the_layer_holds_now(database):
    from autotune.runtime.torch_layer import _rounded_if_tf32

    layer = Conv2d(3, 4, 3, bias=False, database=database)
    assert "bias" in layer._parameters  # a parameter of None, as torch.nn.Conv2d's
    assert layer._held() == (layer.weight, None) and layer._held()[0] is layer.weight
    layer._adopt(torch.ones(4, 3, 3, 3), torch.zeros(4))  # replaced: the new ones are read
    assert layer._held()[0] is layer.weight and layer._held()[1] is layer.bias
    layer._adopt(torch.ones(4, 3, 3, 3), None)
    assert layer._held()[1] is None and "bias" not in dict(layer.named_parameters())

    class Doubled(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    # Parametrized, the weight is computed on each read: the attribute, not the dictionary.
    torch.nn.utils.parametrize.register_parametrization(layer, "weight", Doubled())
    assert torch.equal(layer._held()[0], 2 * torch.ones(4, 3, 3, 3))
    x32, x16 = torch.randn(1, 3, 5, 5), torch.randn(1, 3, 5, 5, dtype=torch.bfloat16)
    w, rounded = torch.randn(4, 3, 3, 3), torch.zeros(4, 3, 3, 3)
    allowed = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        assert _rounded_if_tf32(x32, w, rounded) is rounded
        assert _rounded_if_tf32(x16, w, rounded) is w
        assert _rounded_if_tf32(x32, w, None) is w
        torch.backends.cudnn.allow_tf32 = False
        assert _rounded_if_tf32(x32, w, rounded) is w
    finally:
        torch.backends.cudnn.allow_tf32 = allowed


def test_a_layers_autocast_casts_are_made_once_and_follow_its_weight(database):
    layer = Conv2d(8, 4, 3, database=database).to(memory_format=torch.channels_last)
    weight, bias = layer._cast_parameters(torch.bfloat16)
    assert weight.dtype is torch.bfloat16 and bias.dtype is torch.bfloat16
    assert weight.is_contiguous(memory_format=torch.channels_last)  # the weight's own format
    assert torch.equal(weight, layer.weight.detach().to(torch.bfloat16))
    again = layer._cast_parameters(torch.bfloat16)
    assert again[0] is weight and again[1] is bias  # kept, not cast on every call
    with torch.no_grad():
        layer.weight.mul_(2)  # written in place: cast again
    assert torch.equal(layer._cast_parameters(torch.bfloat16)[0], layer.weight.to(torch.bfloat16))
    with torch.no_grad():
        layer.bias.add_(1)
    assert torch.equal(layer._cast_parameters(torch.bfloat16)[1], layer.bias.to(torch.bfloat16))
    fp16 = layer._cast_parameters(torch.float16)[0]
    assert fp16.dtype is torch.float16 and layer._cast_parameters(torch.float16)[0] is fp16
    layer.double()  # converted: nothing kept from before
    assert not layer._casts
    layer._adopt(torch.ones(4, 8, 3, 3), None)  # replaced (a folded BatchNorm, a new format)
    assert layer._cast_parameters(torch.bfloat16) == (layer._casts[torch.bfloat16][2], None)
    assert torch.equal(layer._casts[torch.bfloat16][2], torch.ones(4, 8, 3, 3))


def test_on_the_cpu_a_layer_is_not_autocast_for_cuda(database):
    from autotune.runtime.torch_tensors import autocast_dtype, autocast_inputs

    x = torch.randn(1, 8, 5, 5)
    assert autocast_dtype(x) is None
    assert autocast_inputs(x, x) == (x, x, None, None)
