"""autotune: design-space exploration and autotuning of GPU convolution kernels."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

# kernels/ and search_spaces/ sit beside the package in the repository (editable install).
REPO_ROOT = Path(__file__).resolve().parent.parent
KERNELS_DIR = REPO_ROOT / "kernels"
SPACES_DIR = REPO_ROOT / "search_spaces"
RESULTS_DIR = REPO_ROOT / "results"
