"""The results database's interface: `Store`, its writes, claims and queries over one engine."""

from __future__ import annotations

from autotune.store.claims import Claims
from autotune.store.engine import hide_passwords
from autotune.store.queries import Queries
from autotune.store.schema import SHAPE_COLUMNS
from autotune.store.writes import Writes

# SHAPE_COLUMNS and hide_passwords stay importable from here, where they were before the split.
__all__ = ["SHAPE_COLUMNS", "Store", "hide_passwords"]


class Store(Writes, Claims, Queries):
    """The results database behind a SQLAlchemy URL (or a SQLite file path).

    Opened by engine.StoreBase (the URL, our schema or a refusal, upgrades of older schemas);
    each part of its interface lives in its own module: writes, claims (study leases) and
    queries, which read one timing protocol, the store's `protocol` unless told otherwise."""
