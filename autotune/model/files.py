"""Files autotune writes: whether one can be made there, asked before any costly start (the GPU
worker; shared by the results database and tune_kernel's cache file), and reading and writing
one safely where other users may plant links (the cubin cache)."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
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


def read_no_symlink(path: Path) -> bytes:
    """A regular file's bytes; OSError for a symbolic link (O_NOFOLLOW) or anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return fh.read()


def write_atomically(final: Path, data: bytes) -> None:
    """Write data under a fresh name (mkstemp: created exclusively, so never through a planted
    symlink) and rename it over final (which replaces a link rather than following it)."""
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would make the entry a miss for other users
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = ["read_no_symlink", "why_not_creatable", "write_atomically"]
