"""Kernel identity: one digest of the code a family's measurements come from (DESIGN section 2).

A measurement belongs to the code that produced it. The digest covers what the compiler is
given apart from a configuration's defines: the kernel's source, the headers it includes with
quotes (found as the compiler finds them), the float64 reference it is checked against, any
hooks module of a user's kernel directory, and the compile options. Files are named by their
base name, not their path: the same code installed elsewhere has the same digest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from autotune.families.headers import option_dirs, quoted_headers

# NVRTC options every kernel is built with (the compiler's default; part of the digest).
BUILD_OPTIONS = ("-std=c++17", "-Xptxas=-v", "--fmad=true")
# Hex digits of the sha256 kept: 64 bits tell apart the versions of one family's code (digests
# are compared within a family only), and the digest is stored in every evaluation and in its
# unique index: the full 64 digits would add 100 bytes to each (the database keeps ~700).
DIGEST_CHARS = 16


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def kernel_digest(
    sources: Iterable[Path], options: Sequence[str], include_dirs: Sequence[Path]
) -> str:
    """sha256 (hex, its first DIGEST_CHARS digits) over the sources' texts, the texts of the
    headers they include with quotes, and the options: a change to any of them gives another
    digest. A source file that is
    missing counts as empty text (a family whose kernel is gone has no current measurements
    to match anyway)."""
    search = (*option_dirs(options), *include_dirs)
    files = []
    for source in sources:
        path = Path(source)
        text = path.read_text() if path.is_file() else ""
        headers = quoted_headers(text, path.parent, search)
        files.append([path.name, _sha(text), sorted([n, _sha(t)] for n, t in headers)])
    material = json.dumps({"files": files, "options": list(options)}, sort_keys=True)
    return _sha(material)[:DIGEST_CHARS]
