"""Outputs the worker sends back to the caller's verify or observers: an array of SPILL_BYTES or
more travels as a file (one read by the caller, then removed), the rest through the pipe."""

from __future__ import annotations

import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import autotune.model.evaluator as evaluator
from autotune.families.plan import Launch
from autotune.gpu.given import GivenCheck, argument_arrays, write_arguments
from autotune.gpu.synthetic import SyntheticSession
from autotune.gpu.timing import TimingPolicy
from autotune.model.evaluator import SpilledArray, WithOutputs, spill
from autotune.model.records import Measurement


def test_large_arrays_are_spilled_to_files_and_read_back_once(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluator, "SPILL_BYTES", 64)
    big, small = np.arange(100, dtype=np.float64), np.arange(4, dtype=np.float32)
    outputs = spill([big, small, None, np.int32(7)], tmp_path / "outputs")
    assert isinstance(outputs[0], SpilledArray) and outputs[1] is small
    assert outputs[2:] == [None, np.int32(7)]
    answer = pickle.loads(pickle.dumps(WithOutputs(Measurement.from_samples([1.0]), outputs)))
    received = answer.received()
    np.testing.assert_array_equal(received[0], big)
    assert received[0].dtype == np.float64 and received[1] is not None
    assert not any((tmp_path / "outputs").iterdir())  # read once, then removed


def test_the_synthetic_worker_spills_what_a_real_one_would(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluator, "SPILL_BYTES", 64)
    x = np.linspace(0, 1, 100)
    data, digest = write_arguments(
        tmp_path, argument_arrays([x, np.int32(100)], [x / 3, None], None)
    )
    check = GivenCheck(data, digest, 2, (0,), 1e-6, TimingPolicy(), outputs_back=True)
    assert check.outputs_directory == Path(data) / "outputs"  # removed with the arguments
    plan = SimpleNamespace(
        defines=(), launches=(Launch("k", (1, 1, 1), (1, 1, 1), ("arg0", "arg1")),)
    )
    back = SyntheticSession().evaluate(SimpleNamespace(plan=plan, check=check))
    assert isinstance(back.outputs[0], SpilledArray) and back.outputs[1] == 100
    np.testing.assert_array_equal(back.received()[0], x / 3)


class DeviceArray:
    """What spill needs of a CuPy array: its size, dtype, shape and get(out=)."""

    def __init__(self, host: np.ndarray) -> None:
        self.host, self.nbytes, self.dtype, self.shape = host, host.nbytes, host.dtype, host.shape
        self.copied_into = []

    def get(self, out=None):
        if out is None:
            return self.host.copy()
        out[...] = self.host
        self.copied_into.append(type(out))
        return out


def test_a_device_array_is_copied_straight_into_the_file_and_mapped_back(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluator, "SPILL_BYTES", 64)
    big, small = DeviceArray(np.arange(100, dtype=np.float32)), DeviceArray(np.ones(3))
    outputs = spill([big, small], tmp_path / "outputs")
    assert big.copied_into == [np.memmap]  # one copy, into the file's pages
    assert isinstance(outputs[0], SpilledArray)
    assert type(outputs[1]) is np.ndarray  # small: through the pipe, as a host array
    (received,) = WithOutputs(Measurement.from_samples([1.0]), outputs[:1]).received()
    np.testing.assert_array_equal(received, big.host)
    received[0] = -1  # the caller may change it (copy-on-write), as its own array
    assert received[0] == -1
    assert not any((tmp_path / "outputs").iterdir())
