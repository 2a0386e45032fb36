"""Where the results database is when nobody names one: the one place that says so.

The user's data directory (XDG: $XDG_DATA_HOME/autotune/autotune.db, ~/.local/share/autotune/
autotune.db without it), so that a program using autotune.conv2d finds the same database from
any working directory; AUTOTUNE_DB names another (a path or a SQLAlchemy URL). --storage and the
API's storage= / database= arguments still win: this is only their default. Read by the entry
points (the CLI's options, the runtime and tune_kernel), never deeper."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV_VAR = "AUTOTUNE_DB"


def default_storage(environ: Mapping[str, str] | None = None) -> str:
    """The results database to use when none is named (see the module's note)."""
    env = os.environ if environ is None else environ
    named = env.get(ENV_VAR, "").strip()
    if named:
        return named
    data_home = env.get("XDG_DATA_HOME", "").strip()
    base = Path(data_home) if data_home else Path.home() / ".local" / "share"
    return str(base / "autotune" / "autotune.db")
