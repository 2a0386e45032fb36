"""The headers a kernel source includes with #include "name": found as nvcc would find them, and
handed to NVRTC by name, so that what is compiled is exactly what the cubin cache is keyed on."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_QUOTED = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)
_INCLUDE_OPTION = re.compile(r"^(?:-I|--include-path=)(.+)$")

Headers = tuple[tuple[str, str], ...]  # (name as included, text), in the order first included


def option_dirs(options: Iterable[str]) -> tuple[Path, ...]:
    """The directories named by -I<dir> or --include-path=<dir> options."""
    return tuple(Path(m.group(1)) for o in options if (m := _INCLUDE_OPTION.match(o)))


def quoted_headers(text: str, source_dir: Path | None, search: Iterable[Path]) -> Headers:
    """Every header `text` includes with quotes, and those they include in turn: looked up beside
    the file that includes it, then in `search`, in order. A name found nowhere is left out, for
    NVRTC to look up itself (its own headers) or to report."""
    search = tuple(search)
    found: dict[str, str] = {}
    pending = [(text, source_dir)]
    while pending:
        body, directory = pending.pop()
        for name in _QUOTED.findall(body):
            if name in found:
                continue
            for where in (*((directory,) if directory is not None else ()), *search):
                path = where / name
                if path.is_file():
                    found[name] = path.read_text()
                    pending.append((found[name], path.parent))
                    break
    return tuple(found.items())
