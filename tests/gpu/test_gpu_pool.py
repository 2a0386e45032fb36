"""On a CUDA device with PyTorch: autotune.MaxPool2d's kernel against PyTorch's max_pool2d, bit
for bit, in every storage type it serves, at odd shapes, windows, strides and paddings, with
NaN and infinities in the windows; PyTorch's pooling where the kernel does not serve the input;
the kernel in a captured CUDA graph and PyTorch's under torch.compile; and optimize()'s model
with its poolings swapped against the model as PyTorch runs it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

from autotune.runtime.torch_pool import MaxPool2d, max_pool2d_nhwc  # noqa: E402

F = torch.nn.functional
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (batch, channels, side, kernel, stride, padding): ResNet-50's and VGG-16's poolings, then odd
# sides, batches of 1 and 3, strides of 1 to 4, and pixels of one chunk and of several.
CASES = [
    (32, 64, 112, 3, 2, 1),
    (2, 512, 28, 2, 2, 0),
    (1, 8, 7, 3, 2, 1),
    (3, 24, 13, 2, 2, 0),
    (3, 16, 37, 3, 3, 1),
    (1, 40, 13, 3, 1, 1),
    (2, 8, 37, 4, 4, 2),
    (3, 64, 13, (3, 2), (2, 1), (1, 0)),
]


def channels_last(b, c, side, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(b, c, side, side, device="cuda", generator=g).to(dtype)
    return x.contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_kernel_is_pytorchs_max_pooling_bit_for_bit(case, dtype):
    b, c, side, kernel, stride, padding = case
    x = channels_last(b, c, side, dtype, seed=len(str(case)))
    ours = max_pool2d_nhwc(x, kernel, stride, padding)
    assert ours is not None, "the kernel serves this pooling"
    expected = F.max_pool2d(x, kernel, stride, padding)
    assert ours.shape == expected.shape
    assert ours.is_contiguous(memory_format=torch.channels_last)
    bits = torch.int32 if dtype == torch.float32 else torch.int16  # an integer of its size
    assert torch.equal(ours.view(bits), expected.view(bits))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_and_infinities_are_pooled_as_pytorch_pools_them(dtype):
    x = channels_last(2, 16, 9, dtype, seed=3)
    x[0, 0, 0, 0] = float("nan")
    x[0, 1, 4, 4] = float("inf")
    x[1, 2, :, :] = float("-inf")  # a whole plane of -inf: every window's maximum is -inf
    x[1, 3, 2, 2] = float("nan")
    x[1, 3, 2, 3] = float("inf")  # NaN and inf in one window: NaN
    ours = max_pool2d_nhwc(x, 3, 2, 1)
    expected = F.max_pool2d(x, 3, 2, 1)
    assert torch.equal(ours.isnan(), expected.isnan())
    assert torch.equal(ours.nan_to_num(0.0), expected.nan_to_num(0.0))
    assert ours[1, 3, 1, 1].isnan() and ours[1, 2].eq(float("-inf")).all()


@pytest.mark.parametrize(
    "make",
    [
        lambda: channels_last(2, 16, 9, torch.bfloat16, 1).contiguous(),  # NCHW
        lambda: channels_last(2, 12, 9, torch.bfloat16, 1),  # 24-byte pixels
        lambda: channels_last(2, 16, 9, torch.float64, 1),
        lambda: channels_last(2, 16, 9, torch.bfloat16, 1)[:, :, 1:, 1:],  # a view off 16 bytes
    ],
    ids=["nchw", "24-byte pixels", "float64", "a view"],
)
def test_an_input_the_kernel_does_not_serve_is_pooled_by_pytorch(make):
    x = make()
    pool = MaxPool2d.from_torch(torch.nn.MaxPool2d(3, 2, 1))
    assert max_pool2d_nhwc(x, 3, 2, 1) is None
    assert torch.equal(pool(x), F.max_pool2d(x, 3, 2, 1))


def test_the_kernel_runs_in_a_captured_cuda_graph():
    pool = MaxPool2d.from_torch(torch.nn.MaxPool2d(3, 2, 1))
    static = channels_last(3, 64, 13, torch.bfloat16, 4)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        pool(static)  # warm-up: compiled and prepared before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = pool(static)
    fresh = channels_last(3, 64, 13, torch.bfloat16, 5)
    static.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, F.max_pool2d(fresh, 3, 2, 1))


def test_a_shape_not_yet_run_is_pytorchs_pooling_in_a_capture():
    pool = MaxPool2d.from_torch(torch.nn.MaxPool2d(3, 2, 1))
    static = channels_last(1, 24, 19, torch.float16, 8)  # a shape no other test runs
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = pool(static)  # nothing compiled or loaded while capturing: PyTorch's kernel
    fresh = channels_last(1, 24, 19, torch.float16, 9)
    static.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, F.max_pool2d(fresh, 3, 2, 1))


def test_under_torch_compile_the_pooling_is_compiles_own():
    pool = MaxPool2d.from_torch(torch.nn.MaxPool2d(2))
    x = channels_last(2, 32, 14, torch.float16, 6)
    compiled = torch.compile(pool, fullgraph=True)
    with torch.no_grad():
        assert torch.equal(compiled(x), F.max_pool2d(x, 2))


def test_optimize_swaps_a_models_poolings_and_computes_its_result(tmp_path):
    import copy

    from autotune.runtime.models import optimize

    model = torch.nn.Sequential(
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1),
        torch.nn.Tanh(),
        torch.nn.MaxPool2d(2),
        torch.nn.MaxPool2d(2, ceil_mode=True),  # not taken: PyTorch's
    ).eval()
    reference = copy.deepcopy(model)
    x = channels_last(2, 32, 29, torch.bfloat16, 7)
    with torch.no_grad():
        run = optimize(model, database=str(tmp_path / "empty.db"), fuse=False)
        assert [type(m) for m in run.modules() if isinstance(m, torch.nn.MaxPool2d)] == [
            MaxPool2d,
            MaxPool2d,
            torch.nn.MaxPool2d,
        ]
        assert torch.equal(run(x), reference(x))
