"""Whether a file a command will write can be made there, asked before any costly start (the
GPU worker): the one check shared by the results database and tune_kernel's cache file."""

from __future__ import annotations

import os
from pathlib import Path

from autotune.model.quoting import printable


def why_not_creatable(path: str | Path) -> str | None:
    """None when `path` is a regular file or could be created (its directories included);
    otherwise why not, naming the culprit (escaped: a path may hold any byte)."""
    file = Path(path).expanduser().absolute()
    if file.exists():
        return None if file.is_file() else f"{printable(str(file))} is not a regular file"
    ancestor = file.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{printable(str(ancestor))} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{printable(str(ancestor))} is not writable"
    return None


__all__ = ["why_not_creatable"]
