"""The project's committed H100 results for tests: the campaign files under results/campaigns/
merged into one fresh database, as a fresh clone's first reading command does."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.store import Store
from autotune.store.campaigns import campaign_files, load_campaigns

CAMPAIGNS = Path(__file__).resolve().parents[1] / "results" / "campaigns"


def committed_database(directory: Path) -> Path:
    """A database in `directory` holding every committed campaign (skips without them)."""
    if not campaign_files(CAMPAIGNS):
        pytest.skip("the committed campaign files are not in this checkout")
    path = directory / "committed.db"
    if not path.is_file():
        with Store(str(path)) as store:
            load_campaigns(store, CAMPAIGNS)
    return path
