"""Kernel Tuner's Tunable arguments and output observers, mapped onto ours (no GPU, no compiler):
checked, keyed, saved option by option, selected per configuration in the plan, in the worker's
buffers, and in the synthetic session's outputs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from autotune.families.plan import Launch
from autotune.gpu import given
from autotune.gpu.given import GivenCheck, argument_arrays, read_arguments, write_arguments
from autotune.gpu.synthetic import SyntheticSession
from autotune.gpu.timing import TimingPolicy
from autotune.kt.api import tune_kernel
from autotune.kt.arguments import TuneKernelError, check_request
from autotune.kt.arrays import TunableArgument
from autotune.kt.observers import OUTPUT, observed_keys, output_check, output_observers
from autotune.kt.space import signature
from autotune.kt.study import given_kernel
from autotune.model.records import Measurement, Status
from tests.kt_tunable import Tunable

SOURCE = "template <typename T> __global__ void k(T *y, const T *x, int n) { }\n"


def args(x=None, **extra):
    x = np.arange(100, dtype=np.float64) if x is None else x
    both = {"float": x.astype(np.float32), "double": x}
    base = {
        "kernel_name": "k<T>",
        "kernel_source": SOURCE,
        "problem_size": 100,
        "arguments": [Tunable("T", both), Tunable("T", both), np.int32(100)],
        "tune_params": {"block_size_x": [32, 64], "T": ["float", "double"]},
    }
    return {**base, **extra}


def test_a_tunable_is_checked_keyed_and_saved_option_by_option(tmp_path):
    request = check_request(args(answer=[np.ones(100), None, None]))
    first = request.arguments[0]
    assert isinstance(first, TunableArgument) and first.key == "T"
    assert [o for o, _ in first.options] == ["float", "double"]
    assert first.index({"T": "double"}) == 1
    assert "tunable T{float:float32[100]|double:float64[100]}" in signature(request)
    options = [tuple(v for _, v in a.options) for a in request.arguments[:2]]
    path, _ = write_arguments(
        tmp_path, argument_arrays([*options, np.int32(100)], request.answer, {})
    )
    saved = read_arguments(path)
    assert set(saved) == {"arg0.0", "arg0.1", "arg1.0", "arg1.1", "arg2", "answer0"}
    assert saved["arg0.0"].dtype == np.float32 and saved["arg1.1"].dtype == np.float64


def test_each_configuration_launches_its_option(tmp_path):
    family = given_kernel(check_request(args()), None, tmp_path)
    plan = family.plan(None, SimpleNamespace(as_dict=lambda: {"block_size_x": 32, "T": "double"}))
    assert plan.launches[0].args == ("arg0.1", "arg1.1", "arg2")
    assert plan.launches[0].kernel == "k<T>"  # NVRTC lowers it (tests/nvrtc)
    assert "extern" not in family.source_path.read_text()  # a template has no C linkage


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([Tunable("T", {})], r"arguments\[0\] is a Tunable without arrays"),
        ([Tunable("T", {"a": np.zeros(3), "b": np.zeros(4)})], "differ in shape"),
        ([Tunable("T", {"a": [1.0]})], r"arguments\[0\]\['a'\] is a list"),
        ([Tunable("T", {"a": Tunable("T", {"b": np.zeros(3)})})], "nests a Tunable"),
        ([Tunable("nope + 1", {"a": np.zeros(3)})], "names 'nope', not a tunable"),
    ],
)
def test_bad_tunables_are_one_line(bad, match):
    with pytest.raises(TuneKernelError, match=match):
        tune_kernel(**args(arguments=bad), evaluator=object())


def test_the_worker_gives_the_selected_option_as_the_argument(monkeypatch):
    loaded = {
        "arg0.0": np.zeros(3, np.float32),
        "arg0.1": np.zeros(3),
        "arg1": np.ones(3),
        "answer0": np.ones(3),
    }
    check = GivenCheck(Path("arguments-d"), "d", 2, (0,), 1e-6, TimingPolicy(), outputs_back=True)
    monkeypatch.setattr(GivenCheck, "_on_device", lambda self: loaded)
    plan = SimpleNamespace(all_launches=(Launch("k", (1, 1, 1), (1, 1, 1), ("arg0.1", "arg1")),))
    arrays = check.arrays(None, plan)
    assert set(arrays) == {"arg0.1", "arg0", "arg1"}  # not the other option, not the answer
    assert arrays["arg0"] is arrays["arg0.1"] and arrays["arg0"].dtype == np.float64
    assert given.argument_of("arg0.1") == "arg0" and given.argument_of("arg1") == "arg1"


def test_the_synthetic_session_sends_the_answer_in_the_option_s_precision(tmp_path):
    x = np.linspace(0, 1, 7)
    options = (x.astype(np.float16), x.astype(np.float32))
    data, digest = write_arguments(
        tmp_path, argument_arrays([options, np.int32(7)], [x / 3, None], None)
    )
    check = GivenCheck(data, digest, 2, (0,), 1e-6, TimingPolicy(), outputs_back=True)
    for option, dtype in ((0, np.float16), (1, np.float32)):
        launch = Launch("k", (1, 1, 1), (1, 1, 1), (f"arg0.{option}", "arg1"))
        plan = SimpleNamespace(defines=(), launches=(launch,))
        back = SyntheticSession().evaluate(SimpleNamespace(plan=plan, check=check))
        assert back.outputs[0].dtype == dtype and back.outputs[1] == 7
        np.testing.assert_array_equal(back.outputs[0], (x / 3).astype(dtype))


class Observer:
    def __init__(self, results) -> None:
        self.results, self.seen = results, None

    def process_output(self, answer, outputs):
        self.seen = (answer, outputs)

    def get_results(self):
        return self.results


def test_output_observers_add_their_numbers_and_replace_the_default_check():
    first, second = Observer({"err": np.float64(0.5), "label": "x"}), Observer({"nan": np.nan})
    assert output_observers([first, "not one", second]) == (first, second)
    check = output_check([first, second], None, [None, [1.0, 2.0]])
    timed = Measurement.from_samples([1.0])
    m = check([None, np.zeros(2)], timed)
    assert m.status is Status.OK and m.observations == ((f"{OUTPUT}err", 0.5),)
    assert first.seen[0][0] is None and first.seen[0][1].tolist() == [1.0, 2.0]
    assert observed_keys(m, ()) == {"err": 0.5}  # a result key, also from a stored evaluation
    wrong = Measurement(Status.WRONG_RESULT, error="the verify function returned False")
    assert output_check([first], lambda outputs: wrong, None)([1], timed) is wrong
    assert output_check([], None, None) is None
