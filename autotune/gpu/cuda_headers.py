"""The CUDA toolkit's own headers (<cuda_fp16.h>, <cuda_bf16.h>, <mma.h>, ...) for a kernel of
the user's that includes them with angle brackets.

NVRTC's wheel has no copy of them, and NVRTC searches no directory by itself. Kernel Tuner's
CUDA backends put the toolkit's include directory on the search path (its accuracy example
includes <cuda_fp16.h> for `half`); here too, from the first of: the NVIDIA wheels' include
directory (nvidia-cuda-runtime), CUDA_HOME or CUDA_PATH, the toolkit of the nvcc on PATH, and
/usr/local/cuda. Only a source that includes one gets the flag: the built-in families' cubin
cache keys stay as they were.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shutil
from pathlib import Path

_INCLUDES = re.compile(
    r"^\s*#\s*include\s*<((?:cuda_\w+|mma|sm_\d+_intrinsics|vector_types)\.h)>", re.MULTILINE
)
_WHEEL_DIRS = ("cu13/include", "cuda_runtime/include")  # CUDA 13's and CUDA 12's wheels


def included(text: str) -> tuple[str, ...]:
    """The toolkit headers the source includes with angle brackets, in order."""
    return tuple(dict.fromkeys(_INCLUDES.findall(text)))


@functools.cache
def cuda_include_dir() -> Path | None:
    """The first include directory (see the module's note) that holds cuda_fp16.h, or None."""
    candidates: list[Path] = []
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += [Path(root) / d for d in _WHEEL_DIRS]
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            candidates.append(Path(os.environ[variable]) / "include")
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    return next((d for d in candidates if (d / "cuda_fp16.h").is_file()), None)


def cuda_include_flags(text: str) -> tuple[str, ...]:
    """The -I flag a source needs for the toolkit headers it includes: none where it includes
    none, or where no toolkit is found (NVRTC then names the header it cannot open)."""
    root = cuda_include_dir() if included(text) else None
    return () if root is None else (f"-I{root}",)


def cuda_headers_digest(text: str) -> str:
    """What tells one toolkit's copy of the included headers from another's, for the cubin
    cache's key: their directory and the digest of each included file."""
    root = cuda_include_dir()
    sha = hashlib.sha256(str(root).encode())
    for name in included(text):
        path = root / name if root is not None else None
        sha.update(path.read_bytes() if path is not None and path.is_file() else b"-")
    return sha.hexdigest()[:16]


__all__ = ["cuda_headers_digest", "cuda_include_dir", "cuda_include_flags", "included"]
