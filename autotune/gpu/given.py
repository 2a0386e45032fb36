"""The check of a kernel given through tune_kernel: its own arguments, checked against the
answer given (Kernel Tuner's meaning), in place of fresh random inputs and a float64 reference.

The arguments travel to a GPU worker once, as a directory of .npy files named in the check
(read_arguments maps them); to a session in the caller's own process they are handed in memory
(hold_arguments), neither written nor read back. On the device they stay for the session; each
configuration's run gets fresh device copies of them (Kernel Tuner copies the given contents back
before its checked run), so that no candidate sees what another wrote. CuPy is imported where the
session runs only, as in library_tasks.py.
"""

from __future__ import annotations

import inspect
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from autotune.families.plan import KernelPlan
from autotune.gpu.timing import TimingPolicy
from autotune.model.evaluator import spill
from autotune.model.records import Measurement, Status

RTOL = 1e-5  # numpy.allclose's, which Kernel Tuner's default check uses beside atol


def argument_names(count: int) -> tuple[str, ...]:
    """The buffer names of a kernel's positional arguments, in order."""
    return tuple(f"arg{i}" for i in range(count))


def option_buffer(index: int, option: int) -> str:
    """The buffer of option `option` of argument `index`, one of a Tunable argument's arrays
    (the configuration's plan launches with the one its tunables select)."""
    return f"arg{index}.{option}"


def argument_of(buffer: str) -> str:
    """The argument a buffer is: itself, or the argument whose option it is."""
    return buffer.split(".", 1)[0]


def cmem_buffer(symbol: str) -> str:
    """The buffer a __constant__ symbol is copied from."""
    return f"cmem:{symbol}"


# The session's device copies of the arguments, by the data's digest (one set at a time).
_ON_DEVICE: dict[str, dict[str, Any]] = {}
# Arguments handed to a session in this process (InProcessEvaluator), by digest: the caller's
# own arrays, not copies.
_HELD: dict[str, dict[str, np.ndarray]] = {}
_MISMATCHES = None


def _mismatches():
    """Elements where numpy.allclose(want, out) fails: |out - want| > atol + rtol * |out|,
    infinities equal only to themselves, NaN equal to NaN (the answer's NaNs are kept)."""
    global _MISMATCHES
    if _MISMATCHES is None:
        import cupy as cp

        _MISMATCHES = cp.ReductionKernel(
            "T out, U want, float64 atol, float64 rtol",
            "float64 missed",
            "!((double)out == (double)want || (isnan((double)out) && isnan((double)want)) || "
            "fabs((double)out - (double)want) <= atol + rtol * fabs((double)out))",
            "a + b",
            "missed = a",
            "0",
            "autotune_given_mismatches",
        )
    return _MISMATCHES


def argument_arrays(
    arguments: Sequence[Any], answer: Sequence[Any] | None, cmem_args: dict[str, np.ndarray] | None
) -> dict[str, np.ndarray]:
    """Arguments, answer and constant-memory arrays by buffer name. An argument given as a
    tuple is a Tunable's options, each under its option_buffer name."""
    content: dict[str, np.ndarray] = {}
    for i, (name, value) in enumerate(zip(argument_names(len(arguments)), arguments, strict=True)):
        if isinstance(value, tuple):
            for j, option in enumerate(value):
                if option is not None:  # None: an option no configuration launches with
                    content[option_buffer(i, j)] = np.asarray(option)
        else:
            content[name] = np.asarray(value)
    for i, expected in enumerate(answer or ()):
        if expected is not None:
            content[f"answer{i}"] = np.asarray(expected)
    for symbol, value in (cmem_args or {}).items():
        content[cmem_buffer(symbol)] = np.asarray(value)
    return content


def write_arguments(directory: Path, content: dict[str, np.ndarray]) -> tuple[Path, str]:
    """Save argument_arrays' content as a .npy file each in a new directory under `directory`,
    for a worker process: (its path, a name unique to it, which keys the worker's copy on the
    device). Written once per tune_kernel call, which removes it at its end; nothing else reads
    it, so it is neither archived nor hashed: Kernel Tuner's accuracy.py passes about 5 GB,
    which a zip archive checksums and a digest reads back from disk again."""
    directory.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="arguments-", dir=directory))
    try:
        for name, value in content.items():
            np.save(path / f"{name}.npy", value, allow_pickle=False)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path, path.name.removeprefix("arguments-")


def hold_arguments(content: dict[str, np.ndarray]) -> str:
    """Hand argument_arrays' content to a session in this process: the digest that keys it
    (a check with no data directory reads it from here). Kernel Tuner's reduction.py passes
    3.2 GB to each of its twelve calls, which a file would write and map again every time."""
    digest = uuid.uuid4().hex
    _HELD[digest] = content
    return digest


def release_arguments(digest: str) -> None:
    """Forget arguments held for this process's session, and their device copies (a session in
    the caller's process would otherwise keep them on the GPU after the call)."""
    _HELD.pop(digest, None)
    _ON_DEVICE.pop(digest, None)


def with_files(task: Any, written: dict[str, Path]) -> Any:
    """`task` as a worker process can run it: a job whose check holds its arguments in this
    process (a session here lost its CUDA context and a worker took over) gets them as files,
    written once per digest into a directory that `written` records for the caller to remove."""
    check = getattr(task, "check", None)
    if not isinstance(check, GivenCheck) or check.data is not None:
        return task
    path = written.get(check.digest)
    if path is None:
        path, _ = write_arguments(Path(tempfile.gettempdir()), _HELD[check.digest])
        written[check.digest] = path
    return replace(task, check=replace(check, data=path))


def given_arguments(check: GivenCheck) -> dict[str, np.ndarray]:
    """A check's arguments: held in this process, or read from its directory."""
    return _HELD[check.digest] if check.data is None else read_arguments(check.data)


def read_arguments(path: Path) -> dict[str, np.ndarray]:
    """What write_arguments saved, by name, mapped rather than read: an array of gigabytes is
    paged in as it is copied to the device, or not at all where only its header is asked."""
    found = {}
    for file in sorted(Path(path).glob("*.npy")):
        value = np.load(file, mmap_mode="r", allow_pickle=False)
        found[file.stem] = value
    return found


def takes_atol(verify: Callable) -> bool:
    """Kernel Tuner passes atol=atol to verify(answer, result_host) when it takes atol."""
    try:
        parameters = inspect.signature(verify).parameters
    except (TypeError, ValueError):
        return True
    return "atol" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


@dataclass(frozen=True, slots=True)
class GivenCheck:
    """How a given kernel's run is checked (answer and atol, or the user's verify) and timed."""

    data: Path | None  # the directory write_arguments made; None: held in this process
    digest: str
    count: int  # positional arguments
    answered: tuple[int, ...]  # arguments with an answer (None entries are not checked)
    atol: float
    timing: TimingPolicy
    # A verify function of the caller's checks the outputs instead of the answer: it is called
    # in the caller's process, so the worker sends the checked run's outputs back.
    outputs_back: bool = False
    seed: int = 0

    def arrays(self, session, plan: KernelPlan) -> dict[str, object]:
        import cupy as cp

        given = self._on_device()
        used = {a for launch in plan.all_launches for a in launch.args if isinstance(a, str)}
        arrays: dict[str, object] = {}
        for name, value in given.items():
            option = argument_of(name) != name
            if name.startswith("answer") or (option and name not in used):
                continue  # a Tunable's other options are not this configuration's
            # Constant-memory sources are only read; arguments get fresh copies every run.
            fresh = isinstance(value, cp.ndarray) and not name.startswith("cmem:")
            arrays[name] = value.copy() if fresh else value
            if option:  # checked and sent back as the argument it is
                arrays[argument_of(name)] = arrays[name]
        return arrays

    def _on_device(self) -> dict[str, Any]:
        import cupy as cp

        if self.digest not in _ON_DEVICE:
            _ON_DEVICE.clear()
            loaded = {}
            for name, value in given_arguments(self).items():
                # 0-d: a NumPy scalar, passed by value with its dtype (Kernel Tuner's args).
                loaded[name] = value[()] if value.ndim == 0 else cp.asarray(value)
            _ON_DEVICE[self.digest] = loaded
        return _ON_DEVICE[self.digest]

    def verdict(self, session, arrays: dict) -> tuple[Measurement | None, float | None]:
        """Kernel Tuner's default check, numpy.allclose(answer, output, atol=atol) with NaN equal
        to NaN where the answer has NaN, on the device: one fused reduction per output counts
        the elements that miss (one kernel to compile, not one per array operation). With a
        verify of the caller's there is nothing to check here: the outputs go back."""
        if self.outputs_back:
            return None, None
        import cupy as cp

        given = self._on_device()
        failed = []
        for i in self.answered:
            out, expected = arrays[f"arg{i}"], given[f"answer{i}"]
            if not isinstance(out, cp.ndarray):  # a scalar argument: compared as a value
                if not np.isclose(expected, out, atol=self.atol, rtol=RTOL, equal_nan=True):
                    failed.append(f"argument {i} is {out}, the answer {expected}")
                continue
            result, want = out.ravel(), expected.ravel()
            missed = int(_mismatches()(result, want, self.atol, RTOL))
            if missed:
                worst = float(cp.abs(result.astype(cp.float64) - want).max())
                failed.append(
                    f"argument {i}: {missed} of {want.size} elements differ from the answer "
                    f"by more than atol {self.atol:g} + rtol {RTOL:g} x |output| (max {worst:.3e})"
                )
        if failed:
            return Measurement(Status.WRONG_RESULT, error="; ".join(failed)), None
        return None, None

    def host_outputs(self, arrays: dict[str, object]) -> list:
        """The arguments after the checked run, on the host in argument order (what Kernel
        Tuner's verify receives as its result). As Kernel Tuner, only the arrays with an answer
        come back (every array when no answer is given), None in place of the others: an input
        of gigabytes is not copied back for every configuration. Scalars come back as given,
        arrays of SPILL_BYTES or more as files written from the device (model/evaluator.py's
        spill), the others copied to the host."""
        import cupy as cp

        names = argument_names(self.count)
        out = []
        for i, value in enumerate(map(arrays.get, names)):
            if not isinstance(value, cp.ndarray):
                out.append(value)
            elif not self.answered or i in self.answered:
                out.append(value)
            else:
                out.append(None)
        return spill(out, self.outputs_directory)

    @property
    def outputs_directory(self) -> Path | None:
        """Where outputs too large for the worker's pipe are left for the caller (in the
        arguments' directory, which both processes read and the call removes); None for a
        session in the caller's process, which hands them over in memory."""
        return None if self.data is None else self.data / "outputs"


def user_verify(
    verify: Callable, answer: Sequence[Any] | None, count: int, atol: float
) -> Callable[[list], Measurement | None]:
    """Kernel Tuner's verify(answer, result_host[, atol=atol]) as a check of a run's outputs,
    called in the caller's process: WRONG_RESULT when it returns False or raises, else None."""
    expected = [None] * count
    for i, value in enumerate(answer or ()):
        expected[i] = None if value is None else np.asarray(value)
    with_atol = takes_atol(verify)

    def check(outputs: list) -> Measurement | None:
        try:
            ok = verify(expected, outputs, atol=atol) if with_atol else verify(expected, outputs)
        except Exception as err:  # the user's function: its failure is this config's
            why = f"verify raised {type(err).__name__}: {err}"
            return Measurement(Status.WRONG_RESULT, error=why)
        if ok:
            return None
        return Measurement(Status.WRONG_RESULT, error="the verify function returned False")

    return check


__all__ = [
    "GivenCheck",
    "argument_of",
    "option_buffer",
    "takes_atol",
    "user_verify",
    "write_arguments",
]
