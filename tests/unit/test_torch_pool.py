"""autotune.MaxPool2d on the CPU: what it takes from torch.nn.MaxPool2d, PyTorch's pooling
wherever the kernel does not run (the CPU, a trace, torch.compile), and optimize() swapping it
in, a leaf of the traced copies. Skipped without PyTorch (CI has none); the kernel itself is
checked on the GPU (tests/gpu/test_gpu_pool.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from autotune.runtime.models import optimize  # noqa: E402
from autotune.runtime.torch_pool import MaxPool2d, max_pool2d_nhwc  # noqa: E402

nn = torch.nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.ceil = nn.MaxPool2d(2, ceil_mode=True)  # not taken
        self.conv2 = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return self.conv2(self.ceil(self.pool(self.relu(self.conv(x)))))


@pytest.mark.parametrize(
    "pool",
    [nn.MaxPool2d(2), nn.MaxPool2d(3, 2, 1), nn.MaxPool2d((3, 2), (1, 2), (1, 0))],
)
def test_a_taken_pooling_keeps_its_window_and_computes_pytorchs_result(pool):
    ours = MaxPool2d.from_torch(pool)
    assert isinstance(ours, MaxPool2d) and isinstance(ours, nn.MaxPool2d)
    assert (ours.kernel_size, ours.stride, ours.padding) == (
        pool.kernel_size,
        pool.stride,
        pool.padding,
    )
    x = torch.randn(3, 8, 13, 13)
    assert torch.equal(ours(x), pool(x))  # on the CPU: PyTorch's own


@pytest.mark.parametrize(
    "pool",
    [
        nn.MaxPool2d(2, ceil_mode=True),
        nn.MaxPool2d(2, dilation=2),
        nn.MaxPool2d(2, return_indices=True),
    ],
)
def test_poolings_it_does_not_take_stay_pytorchs(pool):
    assert MaxPool2d.from_torch(pool) is None


def test_a_cpu_tensor_is_not_the_kernels():
    x = torch.randn(2, 8, 9, 9, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    assert max_pool2d_nhwc(x, 2, 2, 0) is None


def test_optimize_swaps_the_poolings_it_takes_and_traces_them_as_leaves(tmp_path):
    model = Net().eval()
    x = torch.randn(2, 3, 15, 15)
    with torch.no_grad():
        before = model(x)
        run = optimize(model, x, database=str(tmp_path / "opt.db"))
        after = run(x)
    assert type(model.pool) is MaxPool2d
    assert type(model.ceil) is nn.MaxPool2d  # ceil mode: PyTorch's
    assert torch.equal(after, before)
    # the traced copy (its ReLU fused) calls the pooling as one module
    targets = [n.target for n in run.graph.nodes if n.op == "call_module"]
    assert "pool" in targets and type(run.get_submodule("pool")) is MaxPool2d


def test_optimize_without_pool_leaves_the_poolings(tmp_path):
    model = Net().eval()
    optimize(model, database=str(tmp_path / "opt.db"), pool=False)
    assert type(model.pool) is nn.MaxPool2d


def test_under_torch_compile_it_is_pytorchs_pooling():
    pool = MaxPool2d.from_torch(nn.MaxPool2d(3, 2, 1))
    x = torch.randn(2, 8, 11, 11)
    compiled = torch.compile(pool, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(x), pool(x))
