"""Using the tuned kernels at run time: `conv2d` dispatches each shape to its stored best plan.

`lookup` (which stored configuration serves a shape) and `calls` need no GPU; `dispatch`
(loading and launching, CuPy's runtime), `torch_layer` (the `Conv2d` module, through the custom
op of `torch_op`), `torch_pool` (the `MaxPool2d` module, through `pool_launch`), `model_tuning`
(`tune_model`) and `models` (`optimize`) are imported on first use, so that importing this
package loads neither CuPy's runtime nor PyTorch.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "conv2d": "autotune.runtime.dispatch",
    "runtime": "autotune.runtime.dispatch",
    "Runtime": "autotune.runtime.dispatch",
    "CallError": "autotune.runtime.dispatch",
    "Conv2d": "autotune.runtime.torch_layer",
    "MaxPool2d": "autotune.runtime.torch_pool",
    "LookupMiss": "autotune.runtime.lookup",
    "Request": "autotune.runtime.calls",
    "tune_model": "autotune.runtime.model_tuning",
    "optimize": "autotune.runtime.models",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CallError",
    "Conv2d",
    "LookupMiss",
    "MaxPool2d",
    "Request",
    "Runtime",
    "conv2d",
    "optimize",
    "runtime",
    "tune_model",
]
