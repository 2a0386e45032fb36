"""A stand-in for the GPU session inside the real GPU worker process, for running Kernel Tuner
scripts through tune_kernel on a machine without a GPU (`autotune bench kt-examples
--synthetic`): GpuEvaluator(session="autotune.gpu.synthetic:SyntheticSession") starts the same
worker, with this in the GPU's place. Nothing it answers is a timing.

Each job is answered from its defines: 1 ms + (the sum of the defines named block_size_*) / 1000
ms, so larger blocks are slower. A job whose outputs go back to the caller (a verify of theirs)
(or output observers) gets what Kernel Tuner would copy back from a kernel that computed the
answer: the answer where one is given (for a Tunable argument, in the dtype of the
configuration's option, so that an AccuracyObserver measures that precision's rounding), the
argument as given for the other arrays when no answer is given at all, None for unanswered
arrays, scalars as given. Only those arrays are read from the arguments' file.
A job that asks for observers' readings gets made-up ones of the same names (300 W, its energy
at that power, steady clocks, 50 C), so that scripts whose metrics read them run through.
"""

from __future__ import annotations

import numpy as np

from autotune.gpu.given import argument_names, argument_of, given_arguments
from autotune.model import observe as names
from autotune.model.evaluator import WithOutputs, spill
from autotune.model.observe import Observe
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import DeviceLimits

NAME = "Synthetic worker GPU (no timings)"


class SyntheticSession:
    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index

    def info(self) -> DeviceInfo:
        return DeviceInfo(name=NAME, compute_capability="9.0", sm_count=132)

    def limits(self) -> DeviceLimits:
        return DeviceLimits()

    def evaluate(self, job):
        defines = dict(job.plan.defines)
        ms = 1.0 + sum(v for k, v in defines.items() if k.startswith("block_size")) / 1000
        check = job.check
        readings = _readings(check.timing.observe, ms)
        m = Measurement.from_samples([ms, ms * 1.01, ms * 0.99], **readings)
        if not check.outputs_back:
            return m
        # A Tunable argument's buffer is the option the plan launches with.
        launched = {
            argument_of(a): a for lc in job.plan.launches for a in lc.args if isinstance(a, str)
        }
        outputs: list = []
        given = given_arguments(check)  # mapped: only headers are read until data is asked
        for i, name in enumerate(argument_names(check.count)):
            value = given[launched.get(name, name)]
            if i in check.answered:
                answer = given[f"answer{i}"]
                if launched.get(name, name) != name:  # a Tunable's option: as its dtype holds it
                    answer = answer.astype(value.dtype, copy=False)
                outputs.append(np.array(answer))
            elif not value.shape:
                outputs.append(value[()])
            else:
                outputs.append(None if check.answered else np.array(value))
        return WithOutputs(m, spill(outputs, check.outputs_directory))


def _readings(observe: Observe | None, ms: float) -> dict:
    """Made-up observations of the kinds asked (not measurements: no GPU is there)."""
    if observe is None or not observe.any:
        return {}
    found: dict[str, float] = {}
    if observe.power:
        found[names.POWER_W] = 300.0
    if observe.energy:
        found[names.ENERGY_J] = 300.0 * ms / 1e3
    if observe.clocks:
        for name in (names.SM_CLOCK_MHZ, names.SM_CLOCK_MIN_MHZ, names.SM_CLOCK_MAX_MHZ):
            found[name] = 1980.0
        found.update({names.MEM_CLOCK_MHZ: 2619.0, names.THROTTLED: 0.0, names.TRIES: 1.0})
    if observe.temperature:
        found[names.TEMPERATURE_C] = 50.0
    return {"observations": tuple(sorted(found.items()))}
