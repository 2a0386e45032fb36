"""Whole models on the CPU: their convolutions collected, tuned as ordinary studies (a synthetic
evaluator in place of the GPU, NVRTC compiling for real), and optimize() swapping and folding.
Skipped without PyTorch (CI has none)."""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from autotune.model.problem import ConvProblem  # noqa: E402
from autotune.model.shapes import named_shapes  # noqa: E402
from autotune.runtime.model_tuning import model_studies, tune_model  # noqa: E402
from autotune.runtime.models import collect_convolutions, optimize  # noqa: E402
from autotune.runtime.torch_layer import Conv2d  # noqa: E402
from autotune.store import Store  # noqa: E402
from tests.conftest import SyntheticEvaluator  # noqa: E402

nn = torch.nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)  # grouped: not served
        self.conv3 = nn.Conv2d(8, 4, 1, stride=2)

    def forward(self, x):
        return self.conv3(self.conv2(torch.relu(self.bn1(self.conv1(x)))))


def randomised(model: nn.Module) -> nn.Module:
    """BatchNorm statistics that are not the identity, so that folding them changes weights."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g))
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.randn(m.num_features, generator=g))
            m.bias.data.copy_(torch.randn(m.num_features, generator=g))
    return model.eval()


def test_the_convolutions_a_forward_calls_are_collected_with_refusals():
    convs = collect_convolutions(Block(), torch.randn(2, 3, 12, 12))
    assert [c.name for c in convs] == ["conv1", "conv2", "conv3"]
    assert convs[0].problem == ConvProblem(N=12, K=3, C=3, F=8, B=2, padding=1)
    assert convs[1].problem is None and "groups=2" in convs[1].refused
    assert convs[2].problem == ConvProblem(N=6, K=1, C=8, F=4, B=2, stride=2, tail=1)


def test_resnet50s_convolutions_are_the_shape_set():
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.resnet50().eval()
    convs = collect_convolutions(model, torch.randn(1, 3, 224, 224))
    assert len(convs) == 53 and all(c.problem for c in convs)
    from dataclasses import replace

    collected = {replace(c.problem, B=32, padding=0, tail=0) for c in convs}
    assert collected == set(named_shapes("resnet50"))
    # Every input as the model passes it, read in place: padded, the 3x3 layers and conv1
    # (7x7); with a tail, the stride-2 ones over even sides (conv1, three 3x3 and three 1x1).
    padded = {c.name for c in convs if c.problem.padding}
    assert padded == {c.name for c in convs if c.problem.K in (3, 7)} and len(padded) == 17
    tails = {c.name for c in convs if c.problem.tail}
    assert tails == {c.name for c in convs if c.problem.stride == 2} and len(tails) == 7


def test_a_dtype_is_tuned_by_every_family_that_computes_it():
    sizes = [ConvProblem(N=14, K=3, C=64, F=64, B=2)] * 2
    fp32 = model_studies(sizes, "fp32")
    assert {p for _, p in fp32} == {sizes[0]}  # one study per family, the shape once
    assert "implicit_gemm" in {f.name for f, _ in fp32}
    assert not {"tc_wgmma", "tc_implicit_gemm"} & {f.name for f, _ in fp32}
    bf16 = model_studies(sizes, "bf16")
    assert {f.name for f, _ in bf16} == {"tc_wgmma", "tc_implicit_gemm"}
    assert {(p.dtype, p.layout) for _, p in bf16} == {("bf16", "NHWC")}
    # A padded size: tuned padded by the family that reads padding, pre-padded by the others.
    padded = replace(sizes[0], padding=1)
    studies = {f.name: p for f, p in model_studies([padded], "bf16")}
    assert studies["tc_wgmma"].padding == 1 and studies["tc_implicit_gemm"].padding == 0
    assert studies["tc_implicit_gemm"].input_size == padded.input_size + 2


def test_tune_model_stores_ordinary_studies_and_resumes(tmp_path):
    database = str(tmp_path / "model.db")
    model = Block().eval()
    x = torch.randn(2, 3, 12, 12)
    evaluator = SyntheticEvaluator(lambda defines: 1.0 + defines.get("BM", 0) / 1000)
    kwargs = dict(database=database, budget=2, families=["implicit_gemm"], evaluator=evaluator)
    seen = []
    first = tune_model(
        model, x, "fp32", cache_dir=tmp_path / "cache", on_progress=seen.append, **kwargs
    )
    assert first.studies == 2 and first.evaluated == 4  # conv1 and conv3, 2 each
    assert first.short == 0
    # Progress as `run` reports it: each study's start, evaluations and end.
    assert [p.event for p in seen].count("eval") == 4
    assert [p.event for p in seen].count("end") == 2 and seen[-1].campaign_done == 4
    with Store(database) as store:
        best = store.best(device="Synthetic GPU", kind="conv2d")
    assert set(best["family"]) == {"implicit_gemm"} and len(best) == 2
    # The device's ceilings too: the runtime prices layout copies and unfused epilogues at the
    # measured copy bandwidth, which a store tuned by tune_model alone used to lack.
    with Store(database) as store:
        ceilings = store.ceilings(device="Synthetic GPU")
    assert "copy_bandwidth" in set(ceilings["name"])
    again = tune_model(model, x, "fp32", cache_dir=tmp_path / "cache", **kwargs)
    assert again.evaluated == 0  # resumed: the budget is already spent
    # A larger budget, the deadline already past: both studies short, said by the caller.
    late = tune_model(model, x, "fp32", cache_dir=tmp_path / "cache", time_limit_s=1e-9,
                      **{**kwargs, "budget": 4})  # fmt: skip
    assert late.evaluated == 0 and late.short == 2


class PaddedBlock(nn.Module):
    """A 3x3 convolution with padding 1 over 3 channels, then one over 16."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.second = nn.Conv2d(16, 16, 3, padding=1, bias=False)

    def forward(self, x):
        return self.second(self.first(x))


def test_tune_model_tunes_padded_convolutions_padded_where_the_family_can(tmp_path):
    database = str(tmp_path / "padded.db")
    evaluator = SyntheticEvaluator(lambda defines: 1.0 + defines.get("BM", 0) / 1000)
    x = torch.randn(2, 3, 12, 12)
    done = tune_model(
        PaddedBlock().eval(), x, "bf16", database=database, budget=2, families=["tc_wgmma"],
        evaluator=evaluator, cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert done.studies == 2 and not done.skipped
    with Store(database) as store:
        keys = set(store.best(device="Synthetic GPU", kind="conv2d")["problem_key"])
    # 16 channels: read in place (TMA); 3 channels: no TMA configuration (16-byte chunks), so
    # tuned pre-padded, as the runtime serves it from a padded copy.
    assert keys == {
        "N=12,K=3,C=16,F=16,B=2,padding=1,dtype=bf16,layout=NHWC",
        "N=12,K=3,C=3,F=16,B=2,dtype=bf16,layout=NHWC",
    }


def test_optimize_swaps_convolutions_and_folds_inference_batchnorm(tmp_path):
    model = randomised(Block())
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        before = model(x)
        optimize(model, x, database=str(tmp_path / "opt.db"))
        after = model(x)
    assert isinstance(model.conv1, Conv2d) and isinstance(model.conv3, Conv2d)
    assert isinstance(model.bn1, nn.Identity)  # folded into conv1
    assert isinstance(model.conv2, nn.Conv2d) and not isinstance(model.conv2, Conv2d)
    assert model.conv1.bias is not None  # the BatchNorm's shift
    assert torch.allclose(after, before, rtol=1e-4, atol=1e-5)


def test_a_training_batchnorm_is_not_folded(tmp_path):
    model = randomised(Block()).train()
    optimize(model, database=str(tmp_path / "opt.db"))
    assert isinstance(model.bn1, nn.BatchNorm2d) and isinstance(model.conv1, Conv2d)
    assert model.conv1.bias is None


def test_optimize_compiles_ahead_the_convolutions_the_example_calls(tmp_path, monkeypatch):
    """The plans compiled ahead are the example's convolutions, collected before the swap (a
    forward through swapped layers would prepare them one at a time instead)."""
    import autotune.runtime.models as models

    handed = []
    monkeypatch.setattr(
        models, "_prepare", lambda model, x, rt, layers, convs: handed.append((layers, convs))
    )
    optimize(randomised(Block()), torch.randn(2, 3, 12, 12), database=str(tmp_path / "opt.db"))
    ((layers, convs),) = handed
    assert list(layers) == ["conv1", "conv3"]
    assert [c.name for c in convs] == ["conv1", "conv2", "conv3"]
    assert [c.problem.key for c in convs if c.problem] == [
        ConvProblem(N=12, K=3, C=3, F=8, B=2, padding=1).key,  # read in place
        ConvProblem(N=6, K=1, C=8, F=4, B=2, stride=2, tail=1).key,  # its last row in place
    ]


def test_a_layer_with_a_bias_is_compiled_ahead_with_the_bias_epilogue(tmp_path):
    from autotune.runtime.calls import Request
    from autotune.runtime.models import ahead_calls

    model = randomised(Block())
    x = torch.randn(2, 3, 12, 12)
    convs = collect_convolutions(model, x)
    optimize(model, database=str(tmp_path / "opt.db"))  # conv1 gets bn1's shift as its bias
    layers = {"conv1": model.conv1, "conv3": model.conv3}
    model.conv3.bias = None
    calls = ahead_calls(convs, layers, Request("float32"))
    assert [p.epilogue for p, _ in calls] == ["bias", ""]  # conv2 (grouped) is not served
    assert [p.key for p, _ in calls][1] == convs[2].problem.key


def _fused_layers(module) -> list:
    return [
        m for m in module.modules() if isinstance(m, Conv2d) and (m.activation or m.takes_residual)
    ]


def test_a_relu_after_a_folded_batchnorm_is_fused_into_the_convolution(tmp_path):
    model = randomised(Block())
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        before = model(x)
        run = optimize(model, database=str(tmp_path / "opt.db"))
        after = run(x)
    assert isinstance(run, torch.fx.GraphModule) and run is not model
    (fused,) = _fused_layers(run)
    assert fused.activation == "relu" and not fused.takes_residual
    assert fused.weight is model.conv1.weight  # shared, not copied
    assert model.conv1.activation == ""  # the model itself is unchanged by the fusion
    relus = [n for n in run.graph.nodes if n.target in (torch.relu, "relu")]
    assert not relus, run.graph
    assert torch.allclose(after, before, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name, fused, with_residual", [("resnet18", 20 - 3, 8), ("resnet50", 53 - 4, 16)]
)
def test_resnets_fuse_every_relu_and_residual_add_into_their_convolutions(
    tmp_path, name, fused, with_residual
):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = randomised(getattr(torchvision.models, name)(weights=None))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        before = model(x)
        run = optimize(model, database=str(tmp_path / "opt.db"))
        after = run(x)
    layers = _fused_layers(run)
    # Every convolution but the downsampling ones (whose outputs are the residuals).
    assert len(layers) == fused
    assert sum(m.takes_residual for m in layers) == with_residual
    assert all(m.activation == "relu" for m in layers)
    adds = [n for n in run.graph.nodes if n.op == "call_function" and "add" in str(n.target)]
    assert not adds, adds
    assert torch.allclose(after, before, rtol=1e-3, atol=1e-3)


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(y) if y.sum() > 0 else y  # data-dependent: FX cannot trace it


def test_a_model_fx_cannot_trace_is_optimized_unfused(tmp_path):
    model = Branchy().eval()
    run = optimize(model, database=str(tmp_path / "opt.db"))
    assert run is model and isinstance(model.conv, Conv2d)


def test_channels_last_runs_every_layer_channels_last_and_gives_back_the_callers_format(tmp_path):
    from autotune.runtime.traced import channels_last_copy

    model = randomised(Block())
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        before = model(x)
        run = optimize(model, database=str(tmp_path / "opt.db"), channels_last=True)
        seen = []
        hooks = [
            m.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
            for m in run.modules()
            if isinstance(m, Conv2d)
        ]
        after = run(x)
        for h in hooks:
            h.remove()
    assert isinstance(run, torch.fx.GraphModule)
    # conv2 (grouped, PyTorch's own) keeps channels-last too; every served layer is given it.
    assert len(seen) == 2 and all(t.is_contiguous(memory_format=torch.channels_last) for t in seen)
    assert after.is_contiguous()  # the caller's NCHW, as torch.nn.Conv2d returns it
    assert torch.allclose(after, before, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        given_nhwc = run(x.contiguous(memory_format=torch.channels_last))
    assert given_nhwc.is_contiguous(memory_format=torch.channels_last)
    assert torch.allclose(given_nhwc, before, rtol=1e-4, atol=1e-5)

    assert channels_last_copy(Branchy()) is None  # FX cannot trace it: left as it is


def test_a_model_goes_channels_last_when_the_store_prices_nhwc_calls_lower():
    from dataclasses import replace

    from autotune.model.space import ARCH_LIMITS
    from autotune.runtime.calls import Request
    from autotune.runtime.lookup import Catalogue, Stored
    from autotune.runtime.models import prefers_channels_last
    from tests.unit.test_runtime_lookup import config_of

    limits = ARCH_LIMITS["sm_90"]
    sizes = [ConvProblem(N=56, K=3, C=64, F=64, B=32), ConvProblem(N=56, K=1, C=64, F=256, B=32)]

    def choices(rows, copy_gbps, layout):
        catalogue = Catalogue(rows, copy_gbps=copy_gbps)
        request = Request("float32", layout, allow_tf32=True, epilogue="bias")
        return [next(catalogue.for_call(s, request, limits), None) for s in sizes]

    def stored(family, dtype, layout, time_ms):
        rows = []
        for s in sizes:
            problem = replace(s, dtype=dtype, layout=layout)
            rows.append((problem, Stored(family, config_of(family, problem), time_ms)))
        return rows

    # Only NHWC plans (the tensor-core families): NCHW calls pay copies, priced or not.
    nhwc_only = stored("tc_wgmma", "tf32", "NHWC", 0.05)
    for gbps in (None, 4000.0):
        a, b = choices(nhwc_only, gbps, "NCHW"), choices(nhwc_only, gbps, "NHWC")
        assert prefers_channels_last(a, b)
    # An NCHW plan (strict FP32, which a TF32 call may take) pays no copies for NCHW calls and
    # is faster than the NHWC one with its copies: the model keeps its layout.
    nchw_too = nhwc_only + stored("implicit_gemm", "fp32", "NCHW", 0.05)
    a, b = choices(nchw_too, 4000.0, "NCHW"), choices(nchw_too, 4000.0, "NHWC")
    assert not any(c.layout_ms for c in a) and not prefers_channels_last(a, b)
    # Nothing stored: nothing to weigh.
    assert not prefers_channels_last([None, None], [None, None])


class Viewed(nn.Module):
    """Flattens a 4-D activation with view(), which a channels-last tensor refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return y.view(y.shape[0], -1)


def test_channels_last_chosen_by_the_store_is_dropped_where_the_model_needs_its_layout(
    tmp_path, monkeypatch
):
    import autotune.runtime.models as models

    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        before = Viewed().eval()
        expected = before(x)
        # The store would price channels-last lower: the example's forward refuses it.
        monkeypatch.setattr(models, "_channels_last_pays", lambda *args: True)
        run = optimize(before, x, database=str(tmp_path / "opt.db"))
        assert not isinstance(run, torch.fx.GraphModule)  # the model itself, swapped
        assert torch.allclose(run(x), expected, rtol=1e-4, atol=1e-5)
        # Asked for by the caller, the failure is the caller's to see.
        with pytest.raises(RuntimeError, match="view"):
            optimize(Viewed().eval(), x, database=str(tmp_path / "opt2.db"), channels_last=True)


def test_each_convolution_is_tuned_with_the_epilogue_optimize_gives_it(tmp_path):
    from autotune.runtime.dispatch import runtime
    from autotune.runtime.models import model_epilogues

    model = randomised(Block())
    epilogues = model_epilogues(model, runtime(str(tmp_path / "e.db")))
    # conv1: the folded BatchNorm's shift and the ReLU; conv3: its own bias; conv2 is grouped.
    assert epilogues == {"conv1": "bias_relu", "conv3": "bias"}
    assert type(model.conv1) is nn.Conv2d and isinstance(model.bn1, nn.BatchNorm2d)  # unchanged
    assert model.conv1.weight.device.type == "cpu"
    for epilogue in ("bias_relu", "bias_add_relu"):  # a residual too (ResNet's conv3)
        sizes = ConvProblem(N=12, K=3, C=3, F=8, B=2, epilogue=epilogue)
        pairs = {f.name: p for f, p in model_studies([sizes], "bf16")}
        assert pairs["tc_wgmma"].epilogue == epilogue  # it fuses the epilogue: tuned with it
        assert pairs["tc_implicit_gemm"].epilogue == ""  # it does not: tuned plain, a pass after
