"""tune_kernel's arrays: the arguments, the answer and the constant-memory arrays, checked and
brought to the host (they travel to the GPU worker as data)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from autotune.kt.errors import TuneKernelError
from autotune.model.quoting import quoted


def checked_arguments(arguments: Any) -> list[Any]:
    if not isinstance(arguments, list | tuple):
        raise TuneKernelError("tune_kernel: arguments must be a list")
    arguments = on_host(arguments)
    for i, arg in enumerate(arguments):
        if isinstance(arg, np.ndarray):
            if arg.dtype.hasobject:
                raise TuneKernelError(f"tune_kernel: arguments[{i}] is an array of objects")
        elif not isinstance(arg, np.generic):
            raise TuneKernelError(
                f"tune_kernel: arguments[{i}] is a {type(arg).__name__}; arguments are NumPy "
                "or CuPy arrays and NumPy scalars (e.g. numpy.int32(n)), as Kernel Tuner requires"
            )
    return list(arguments)


def on_host(values: Any) -> Any:
    """CuPy arrays (Kernel Tuner's cupy backend takes them) copied to NumPy ones: they travel to
    the GPU worker as data, like every argument. Recognised by their interface, so that CuPy is
    not imported here."""
    if not isinstance(values, list | tuple):
        return values
    return [
        v.get() if hasattr(v, "__cuda_array_interface__") and hasattr(v, "get") else v
        for v in values
    ]


def checked_answer(answer: Any, arguments: list, own_verify: bool = False) -> list | None:
    if answer is None:
        return None
    if not isinstance(answer, list | tuple) or len(answer) != len(arguments):
        raise TuneKernelError(
            "tune_kernel: answer must be a list as long as arguments (None where not checked)"
        )
    if own_verify:  # the user's verify reads the answer as it likes (a sum for a partial sum)
        return list(answer)
    for i, (expected, arg) in enumerate(zip(answer, arguments, strict=True)):
        if expected is None:
            continue
        if isinstance(arg, np.ndarray):
            expected = np.asarray(expected)
            if expected.size != arg.size:
                raise TuneKernelError(
                    f"tune_kernel: answer[{i}] has {expected.size} elements, "
                    f"arguments[{i}] {arg.size}"
                )
            if not np.can_cast(arg.dtype, expected.dtype):
                raise TuneKernelError(
                    f"tune_kernel: answer[{i}] is {expected.dtype}, which {arg.dtype} "
                    "output cannot be cast to"
                )
        elif not isinstance(expected, np.generic):
            raise TuneKernelError(
                f"tune_kernel: answer[{i}] must be a NumPy scalar, as its argument"
            )
    return list(answer)


def checked_cmem(cmem_args: Any) -> dict[str, np.ndarray]:
    if cmem_args is None:
        return {}
    if not isinstance(cmem_args, Mapping):
        raise TuneKernelError("tune_kernel: cmem_args must be a dict of symbol names to arrays")
    for name, value in cmem_args.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise TuneKernelError(f"tune_kernel: cmem_args name {quoted(name, 40)} is no symbol")
        if not isinstance(value, np.ndarray | np.generic):
            raise TuneKernelError(f"tune_kernel: cmem_args[{name!r}] must be a NumPy array")
    return {name: np.asarray(value) for name, value in cmem_args.items()}


__all__ = ["checked_answer", "checked_arguments", "checked_cmem", "on_host"]
