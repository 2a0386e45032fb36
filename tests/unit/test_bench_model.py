"""`autotune bench model` and `autotune tune-model` without a GPU: refused in one line, and the
bench's table and plot written from rows (no PyTorch needed for those)."""

from __future__ import annotations

import csv
import math

import pytest
from click.testing import CliRunner

from autotune.bench.model import COLUMNS, write_plot, write_table
from autotune.cli.app import main


@pytest.mark.parametrize("precision", [[], ["--precision", "amp"]], ids=["default", "amp"])
def test_bench_model_is_refused_in_one_line_without_a_gpu(tmp_path, precision):
    result = CliRunner().invoke(main, ["bench", "model", *precision, "--output", str(tmp_path)])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert "bench model needs" in line
    assert not list(tmp_path.iterdir())


def test_tune_model_is_refused_in_one_line_without_torchvision_or_a_gpu(tmp_path):
    storage = str(tmp_path / "m.db")
    args = ["tune-model", "--model", "resnet18", "--batch", "1", "--storage", storage]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    # One line of refusal (after "starting the GPU worker" where torchvision is there).
    line = result.output.strip().splitlines()[-1]
    assert "needs PyTorch and torchvision" in line or "no usable CUDA GPU" in line
    assert "Traceback" not in result.output


def test_the_table_and_plot_are_written_from_rows(tmp_path):
    rows = [
        dict(
            zip(
                COLUMNS,
                ("resnet50", 32, "bf16 channels-last", way, ms, host, "1e-3", "1.000", sp, plans),
                strict=True,
            )
        )
        for way, ms, host, sp, plans in (
            ("eager", "5.6", "4.1", "1.00", ""),
            ("ours", "4.0", "3.9", "1.40", "23/23"),
        )
    ]
    csv_path, md_path = write_table(rows, tmp_path)
    with csv_path.open() as f:
        assert [r["way"] for r in csv.DictReader(f)] == ["eager", "ours"]
    table = md_path.read_text().splitlines()
    assert table[0] == "| " + " | ".join(COLUMNS) + " |" and len(table) == 4
    assert "| ours | 4.0 | 3.9 |" in table[3] and table[3].endswith("| 23/23 |")
    assert write_plot(rows, tmp_path).stat().st_size > 1000


def test_the_layer_table_sets_each_convolution_beside_its_stored_time_and_eagers(tmp_path):
    from types import SimpleNamespace

    from autotune.bench.model_layers import LayerCall, flat_name, layer_rows, write_layers
    from autotune.model.problem import ConvProblem

    assert flat_name("layer1_0_conv3__fused") == flat_name("layer1.0.conv3") == "layer1_0_conv3"
    problem = ConvProblem(N=56, K=1, C=64, F=256, B=32, dtype="tf32", layout="NHWC")
    choice = SimpleNamespace(
        problem=problem,
        family="tc_wgmma",
        measured_on=problem.key,
        time_ms=0.065,
        expected_ms=0.070,  # with an unfused epilogue's pass, say
    )
    # ResNet-50's conv3 on the H200 (results/h200/20261129d): 65 us stored, 392 us in the model.
    ours = {
        "layer1_0_conv3__fused": (0.392, LayerCall(choice)),
        "layer1.0.downsample.0": (0.089, LayerCall(choice, padding_ms=0.01)),
        "fc_like": (0.010, None),  # a layer the runtime had no entry for
        "unpriced": (0.05, LayerCall(choice, padding_ms=math.inf)),  # no copy bandwidth known
    }
    eager = {"layer1.0.conv3": (0.081, None), "layer1.0.downsample.0": (0.080, None)}
    rows = layer_rows(ours, eager)
    assert [r["layer"] for r in rows] == list(ours)
    assert rows[0]["in_model_over_expected"] == "5.60" and rows[0]["eager_conv_ms"] == "0.0810"
    assert rows[1]["expected_ms"] == "0.0800" and rows[1]["in_model_over_expected"] == "1.11"
    assert rows[1]["eager_conv_ms"] == "0.0800"
    assert rows[2]["stored_ms"] == "" and rows[2]["family"] == ""
    assert rows[3]["expected_ms"] == rows[3]["in_model_over_expected"] == ""
    csv_path, md_path = write_layers(rows, tmp_path / "layers_resnet50_b32_tf32", "resnet50")
    text = md_path.read_text()
    assert "0.541 ms a forward in the model against 0.195 ms stored and 0.150 ms expected" in text
    assert "1 of 4 layers took 1.5x their expected time or more" in text  # 5.60x; 1.11x not
    with csv_path.open() as f:
        assert len(list(csv.DictReader(f))) == 4


class _Timeline:
    """A host and a GPU stream in simulated milliseconds: each launch costs the host
    `launch_ms`, and the GPU runs a kernel from when it is launched or when the previous one
    ends, whichever is later; an event's time is when the GPU reaches it."""

    def __init__(self, launch_ms: float):
        self.launch_ms, self.host, self.gpu = launch_ms, 0.0, 0.0

    def launch(self, kernel_ms: float) -> None:
        self.host += self.launch_ms
        self.gpu = max(self.gpu, self.host) + kernel_ms

    def fake_torch(self):
        import contextlib
        import types

        timeline = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                timeline.host += 0.001
                timeline.gpu = self.at = max(timeline.gpu, timeline.host)

            def elapsed_time(self, end):
                return end.at - self.at

        def synchronize():
            timeline.host = max(timeline.host, timeline.gpu)

        cuda = types.SimpleNamespace(
            Event=Event, synchronize=synchronize, _sleep=lambda c: timeline.launch(c / 1e6)
        )
        return types.SimpleNamespace(cuda=cuda, no_grad=contextlib.nullcontext)


class _Layer:
    """A module with PyTorch's hook registration whose call launches one kernel."""

    def __init__(self, timeline: _Timeline, kernel_ms: float):
        self.timeline, self.kernel_ms, self.pre, self.post = timeline, kernel_ms, [], []

    def register_forward_pre_hook(self, hook):
        self.pre.append(hook)
        return self._handle(self.pre, hook)

    def register_forward_hook(self, hook):
        self.post.append(hook)
        return self._handle(self.post, hook)

    @staticmethod
    def _handle(hooks, hook):
        import types

        return types.SimpleNamespace(remove=lambda: hooks.remove(hook))

    def __call__(self, x):
        for hook in self.pre:
            hook(self, (x,))
        self.timeline.launch(self.kernel_ms)
        for hook in self.post:
            hook(self, (x,), x)
        return x


def test_layer_times_are_the_kernels_even_where_the_host_launches_slower_than_they_run():
    from autotune.bench.model_layers import layer_ms

    # A launch-bound forward: launches cost 0.05 ms, the small layers run 0.01-0.02 ms.
    timeline = _Timeline(launch_ms=0.05)
    kernels = {"conv1": 0.3, "conv2": 0.01, "conv3": 0.02, "conv4": 0.01}
    layers = {name: _Layer(timeline, ms) for name, ms in kernels.items()}

    def forward(x):
        for layer in layers.values():
            timeline.launch(0.005)  # an elementwise kernel between convolutions
            layer(x)

    measured = layer_ms(
        timeline.fake_torch(), forward, None, layers.items(), repeats=3,
        clock=lambda: timeline.host / 1e3,
    )  # fmt: skip
    for name, ms in kernels.items():
        assert abs(measured[name][0] - ms) < 1e-9, (name, measured[name][0], ms)
    assert all(not layer.pre and not layer.post for layer in layers.values())  # hooks removed
