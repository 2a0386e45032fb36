"""autotune: design-space exploration and autotuning of GPU convolution kernels."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__version__ = "0.1.0"


def package_path(package: str, *parts: str) -> Path:
    """A data file shipped inside `package` (a kernel, a search space), as a filesystem path.

    Read through importlib.resources, so it is the same in a checkout, an editable install and a
    wheel install; pip installs packages unpacked, so the path is real and can be given to NVRTC
    and to readers that want a path."""
    root = files(package)
    if not isinstance(root, Path):
        raise RuntimeError(f"{package} is not installed as files on disk ({root!r})")
    return root.joinpath(*parts)


def __getattr__(name: str):
    """`autotune.conv2d`, `autotune.Conv2d`, `autotune.tune_model`, `autotune.optimize` (the
    runtime) and `autotune.tune_kernel`, imported on first use: importing the package loads
    neither CuPy's runtime, PyTorch nor the tuner (every room imports package_path from here)."""
    if name in ("conv2d", "Conv2d", "tune_model", "optimize"):
        import autotune.runtime

        value = getattr(autotune.runtime, name)
        globals()[name] = value
        return value
    if name == "tune_kernel":
        from autotune.kt.api import tune_kernel

        return tune_kernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
