"""tune_kernel's arrays: the arguments, the answer and the constant-memory arrays, checked and
brought to the host (they travel to the GPU worker as data).

An argument may be Kernel Tuner's Tunable (kernel_tuner.accuracy; TunablePrecision is one): a
dict of arrays of which each configuration passes the one its tunable's value names (the same
data in float, double, half). It becomes a TunableArgument, read by its interface so that
Kernel Tuner need not be installed: every option travels to the worker, and each configuration's
plan names the option it launches with (kt/kernel.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.kt.errors import TuneKernelError
from autotune.model.quoting import quoted


@dataclass(frozen=True, eq=False)  # it holds arrays
class TunableArgument:
    """Kernel Tuner's Tunable argument: `key` (a tunable's name, an expression of the tunables,
    or a function of their dict) selects one of `options`, (value, array or scalar) pairs."""

    key: str | Callable[[dict], Any]
    options: tuple[tuple[Any, Any], ...]

    def index(self, params: Mapping[str, Any]) -> int:
        """The option this configuration passes (its position in `options`); KeyError naming
        the value where the tunables select none."""
        if callable(self.key):
            value = self.key(dict(params))
        elif self.key in params:
            value = params[self.key]
        else:
            from autotune.model.expression import Expression

            value = Expression(self.key)(dict(params))
        for i, (option, _) in enumerate(self.options):
            if option == value:
                return i
        known = ", ".join(str(o) for o, _ in self.options)
        raise KeyError(f"{value!r} is not one of the Tunable's values ({known})")

    @property
    def first(self) -> Any:
        return self.options[0][1]


def is_tunable(value: Any) -> bool:
    """Kernel Tuner's Tunable (a UserDict with param_key and select_for_configuration)."""
    return (
        isinstance(value, Mapping)
        and hasattr(value, "select_for_configuration")
        and hasattr(value, "param_key")
    )


def _tunable(arg: Any, i: int) -> TunableArgument:
    options = []
    for option, value in arg.items():
        (value,) = on_host([value])
        if is_tunable(value):
            raise TuneKernelError(f"tune_kernel: arguments[{i}] nests a Tunable in a Tunable")
        _check_argument(value, f"arguments[{i}][{option!r}]")
        options.append((option, value))
    if not options:
        raise TuneKernelError(f"tune_kernel: arguments[{i}] is a Tunable without arrays")
    shapes = {np.shape(v) for _, v in options}
    if len(shapes) != 1:
        raise TuneKernelError(f"tune_kernel: arguments[{i}]: a Tunable's arrays differ in shape")
    key = arg.param_key
    if not (isinstance(key, str) or callable(key)):
        raise TuneKernelError(f"tune_kernel: arguments[{i}]: a Tunable's key must be text")
    return TunableArgument(key, tuple(options))


def _check_argument(arg: Any, what: str) -> None:
    if isinstance(arg, np.ndarray):
        if arg.dtype.hasobject:
            raise TuneKernelError(f"tune_kernel: {what} is an array of objects")
    elif not isinstance(arg, np.generic):
        raise TuneKernelError(
            f"tune_kernel: {what} is a {type(arg).__name__}; arguments are NumPy "
            "or CuPy arrays and NumPy scalars (e.g. numpy.int32(n)), as Kernel Tuner requires"
        )


def checked_arguments(arguments: Any) -> list[Any]:
    if not isinstance(arguments, list | tuple):
        raise TuneKernelError("tune_kernel: arguments must be a list")
    arguments = on_host(arguments)
    for i, arg in enumerate(arguments):
        if is_tunable(arg):
            arguments[i] = _tunable(arg, i)
        else:
            _check_argument(arg, f"arguments[{i}]")
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
        if isinstance(arg, TunableArgument):  # compared with the output in float64
            if np.asarray(expected).size != np.size(arg.first):
                raise TuneKernelError(
                    f"tune_kernel: answer[{i}] has {np.asarray(expected).size} elements, "
                    f"arguments[{i}] {np.size(arg.first)}"
                )
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


__all__ = [
    "TunableArgument",
    "checked_answer",
    "checked_arguments",
    "checked_cmem",
    "is_tunable",
    "on_host",
]
