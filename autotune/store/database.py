"""The results database's interface: `Store`, its writes, claims, queries and merge over one
engine."""

from __future__ import annotations

from autotune.store.activity import Activity
from autotune.store.claims import Claims
from autotune.store.measured import MeasuredReads
from autotune.store.merge import Merges
from autotune.store.queries import Queries
from autotune.store.repeats import Repeats
from autotune.store.writes import Writes

__all__ = ["Store"]


class Store(Writes, Repeats, Claims, Queries, MeasuredReads, Activity, Merges):
    """The results database behind a SQLAlchemy URL (or a SQLite file path).

    Opened by engine.StoreBase (the URL, our schema or a refusal, upgrades of older schemas);
    each part of its interface lives in its own module: writes, repeats (an evaluation
    measured again, and the figure that ranks configurations), claims (study leases),
    queries, which read one timing protocol, the store's `protocol` unless told otherwise, and
    the merge of another results database into this one."""
