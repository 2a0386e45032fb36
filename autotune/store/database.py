"""The results database's interface: `Store`, its writes, claims and queries over one engine."""

from __future__ import annotations

from autotune.store.claims import Claims
from autotune.store.queries import Queries
from autotune.store.writes import Writes

__all__ = ["Store"]


class Store(Writes, Claims, Queries):
    """The results database behind a SQLAlchemy URL (or a SQLite file path).

    Opened by engine.StoreBase (the URL, our schema or a refusal, upgrades of older schemas);
    each part of its interface lives in its own module: writes, claims (study leases) and
    queries, which read one timing protocol, the store's `protocol` unless told otherwise."""
