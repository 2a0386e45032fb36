"""The results database: schema, upgrades, writes, claims, queries and merges.

Other packages import from here, never from the modules inside, so the store's inside can change
without touching them."""

from autotune.store.claims import StudyClaim
from autotune.store.credentials import hide_passwords, masked_command
from autotune.store.database import Store
from autotune.store.engine import StoreError
from autotune.store.location import default_storage
from autotune.store.merge import MergeCounts, open_merge_source
from autotune.store.queries import StoredEvaluation
from autotune.store.schema import SCHEMA_VERSION, SHAPE_COLUMNS

__all__ = [
    "SCHEMA_VERSION",
    "SHAPE_COLUMNS",
    "MergeCounts",
    "Store",
    "StoreError",
    "StoredEvaluation",
    "StudyClaim",
    "default_storage",
    "hide_passwords",
    "masked_command",
    "open_merge_source",
]
