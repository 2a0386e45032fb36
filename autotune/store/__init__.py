"""The results database: schema, upgrades, writes, claims and queries.

Other packages import from here, never from the modules inside, so the store's inside can change
without touching them."""

from autotune.store.database import (
    SCHEMA_VERSION,
    SHAPE_COLUMNS,
    Store,
    StoredEvaluation,
    StoreError,
    StudyClaim,
    hide_passwords,
)

__all__ = [
    "SCHEMA_VERSION",
    "SHAPE_COLUMNS",
    "Store",
    "StoreError",
    "StoredEvaluation",
    "StudyClaim",
    "hide_passwords",
]
