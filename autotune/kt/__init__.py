"""Kernel Tuner compatibility: tune_kernel (api), its arguments and spaces, the family a given
kernel becomes (kernel), Kernel Tuner's cache files (cache) and T4 results files (t4)."""
