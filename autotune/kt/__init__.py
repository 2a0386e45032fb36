"""Kernel Tuner compatibility: tune_kernel (api), its arguments and spaces, the family a given
kernel becomes (kernel), its study (study), Kernel Tuner's cache files (cache) and T4 results
files (t4); the stored bests (stored) as kernel headers (targets) and compiled kernels (tuned)."""


def __getattr__(name: str):
    """`autotune.kt.tuned_kernel`, imported on first use (as `autotune.tuned_kernel`)."""
    if name == "tuned_kernel":
        from autotune.kt.tuned import tuned_kernel

        return tuned_kernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
