"""CCCL's headers (CUB, Thrust, libcu++) for a kernel that includes them with angle brackets.

NVRTC has no copy of them; CuPy, which autotune depends on, ships one. A kernel of the user's
that includes <cub/...> or <thrust/...> (Kernel Tuner's expdist example reduces with
cub::BlockReduce) is compiled with CuPy's copy on the search path, behind a device-side
<cub/cub.cuh> of ours (kernels/nvrtc/): the umbrella header also declares CUB's device-wide
algorithms, which are host functions that NVRTC refuses.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
from pathlib import Path

from autotune import project_dir

_INCLUDES_CCCL = re.compile(r"^\s*#\s*include\s*<(cub|thrust)/", re.MULTILINE)
DEVICE_SIDE_DIR = project_dir("kernels") / "nvrtc"


@functools.cache
def cccl_root() -> Path | None:
    """CuPy's copy of CCCL (found without importing CuPy), or None where there is none."""
    spec = importlib.util.find_spec("cupy")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        root = Path(location) / "_core" / "include" / "cupy" / "_cccl"
        if (root / "cub" / "cub" / "version.cuh").is_file():
            return root
    return None


def cccl_flags(text: str) -> tuple[str, ...]:
    """The -I flags a kernel's source needs for the CCCL headers it includes: none for a source
    that includes none (the built-in families), or where no copy is found (NVRTC then names the
    header it cannot open)."""
    root = cccl_root() if _INCLUDES_CCCL.search(text) else None
    if root is None:
        return ()
    dirs = (DEVICE_SIDE_DIR, root / "cub", root / "libcudacxx", root / "thrust")
    return tuple(f"-I{d}" for d in dirs)


@functools.cache
def cccl_version() -> str:
    """What tells one copy of CCCL from another, for the cubin cache's key: the digest of
    CUB's version header and of our device-side umbrella header."""
    root = cccl_root()
    texts = [(DEVICE_SIDE_DIR / "cub" / "cub.cuh").read_bytes()]
    if root is not None:
        texts.append((root / "cub" / "cub" / "version.cuh").read_bytes())
    return hashlib.sha256(b"\0".join(texts)).hexdigest()[:16]


__all__ = ["DEVICE_SIDE_DIR", "cccl_flags", "cccl_root", "cccl_version"]
