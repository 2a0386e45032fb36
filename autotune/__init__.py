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


def project_dir(name: str) -> Path:
    """A directory the project keeps at its top level beside the package (kernels/,
    search_spaces/), as a filesystem path.

    pyproject.toml maps each into the package (autotune/<name>) when a wheel is built, so an
    installed wheel has it there; a checkout, an editable install and a checkout on PYTHONPATH
    have it beside the package, as in the repository. Every reader finds it through here."""
    package = Path(__file__).parent
    if (package / name).is_dir():
        return package / name
    # Only a source tree's (pyproject.toml beside it): never another distribution's top-level
    # package of the same name in site-packages.
    if (package.parent / "pyproject.toml").is_file() and (package.parent / name).is_dir():
        return package.parent / name
    raise RuntimeError(f"autotune's {name}/ is neither in {package} nor beside it")


def __getattr__(name: str):
    """`autotune.conv2d`, `autotune.Conv2d`, `autotune.MaxPool2d`, `autotune.tune_model`,
    `autotune.optimize` (the runtime), `autotune.tune_kernel`, `autotune.run_kernel`,
    `autotune.tuned_kernel`, `autotune.NVMLObserver` and Kernel Tuner's file helpers
    (`store_output_file`, `store_metadata_file`), imported on first use: importing the package
    loads neither CuPy's runtime, PyTorch nor the tuner (every room imports package_path from
    here)."""
    if name in ("conv2d", "Conv2d", "MaxPool2d", "tune_model", "optimize"):
        import autotune.runtime

        value = getattr(autotune.runtime, name)
        globals()[name] = value
        return value
    if name == "tune_kernel":
        from autotune.kt.api import tune_kernel

        return tune_kernel
    if name == "run_kernel":
        from autotune.kt.run import run_kernel

        return run_kernel
    if name == "tuned_kernel":
        from autotune.kt.tuned import tuned_kernel

        return tuned_kernel
    if name == "NVMLObserver":  # Kernel Tuner's, for tune_kernel's observers
        from autotune.kt.observers import NVMLObserver

        return NVMLObserver
    if name in ("store_output_file", "store_metadata_file"):
        import autotune.kt.file_utils

        return getattr(autotune.kt.file_utils, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
