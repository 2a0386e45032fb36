"""Where the built-in families' files are: their kernels in kernels/ (the headers they share in
kernels/include/, the float64 references in kernels/reference/) and their search spaces in
search_spaces/, a file per family named after it."""

from __future__ import annotations

from autotune import project_dir

KERNEL_DIR = project_dir("kernels")
# Headers the kernels share (#include "register_tile.cuh"), for every family's kernel.
INCLUDE_DIR = KERNEL_DIR / "include"
REFERENCE_DIR = KERNEL_DIR / "reference"
SPACE_DIR = project_dir("search_spaces")
