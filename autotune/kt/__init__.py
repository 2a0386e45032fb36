"""Kernel Tuner compatibility: tune_kernel (api), its arguments and spaces, the family a given
kernel becomes (kernel), its study (study), its NVMLObserver (observers), Kernel Tuner's cache
files (cache, cache_file), T4 results files (t4) and its file helpers for tune_kernel's
results (file_utils); the stored bests (stored) as kernel headers (targets) and compiled kernels
(tuned)."""

from autotune.kt.observers import NVMLObserver

__all__ = ["NVMLObserver"]


def __getattr__(name: str):
    """`autotune.kt.tuned_kernel`, imported on first use (as `autotune.tuned_kernel`)."""
    if name == "tuned_kernel":
        from autotune.kt.tuned import tuned_kernel

        return tuned_kernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
