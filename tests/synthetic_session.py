"""A stand-in for the GPU session that runs inside the real GPU worker process (gpu/child.py),
for tests of the process boundary on a machine without a GPU: GpuEvaluator(session=
"tests.synthetic_session:SyntheticSession") starts the same worker, with this in its place.

Each job is answered from its defines (time = 1 ms + BLOCK/1000 ms for every define named
block_size_*, so larger blocks are slower); a job whose outputs go back to the caller (a verify
of theirs) returns the arguments as the caller gave them, as if the kernel wrote nothing."""

from __future__ import annotations

import numpy as np

from autotune.gpu.given import argument_names
from autotune.model.evaluator import WithOutputs
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import DeviceLimits


class SyntheticSession:
    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index

    def info(self) -> DeviceInfo:
        return DeviceInfo(name="Synthetic worker GPU", compute_capability="9.0", sm_count=132)

    def limits(self) -> DeviceLimits:
        return DeviceLimits()

    def evaluate(self, job):
        defines = dict(job.plan.defines)
        ms = 1.0 + sum(v for k, v in defines.items() if k.startswith("block_size")) / 1000
        m = Measurement.from_samples([ms, ms * 1.01, ms * 0.99])
        if not job.check.outputs_back:
            return m
        with np.load(job.check.data, allow_pickle=False) as npz:
            outputs = [
                npz[name][()] if npz[name].ndim == 0 else npz[name]
                for name in argument_names(job.check.count)
            ]
        return WithOutputs(m, outputs)
