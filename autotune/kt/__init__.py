"""Kernel Tuner compatibility: tune_kernel (api), its arguments and spaces, the family a given
kernel becomes (kernel), its NVMLObserver (observers), Kernel Tuner's cache files (cache) and T4
results files (t4)."""

from autotune.kt.observers import NVMLObserver

__all__ = ["NVMLObserver"]
