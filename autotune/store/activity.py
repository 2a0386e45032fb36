"""What runs are doing: per run its evaluations, the recent ones, and the claims it holds (for
`autotune status`)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa

from autotune.store.engine import StoreBase
from autotune.store.schema import claims_table, devices_table, evaluations_table, runs_table

if TYPE_CHECKING:
    import pandas as pd


class Activity(StoreBase):
    def run_activity(
        self, recent_since: datetime, started_since: datetime | None = None
    ) -> pd.DataFrame:
        """Per run (those started at or after started_since, if given): id, device, host,
        command, started_at, finished_at, evaluations (all), recent (recorded since
        recent_since), last_at (its newest evaluation), claims (held now), lease_left_s (of its
        claim that runs out first, negative when expired; NaN without one)."""
        r, d, e, c = runs_table.c, devices_table.c, evaluations_table.c, claims_table.c
        evals = (
            sa.select(
                e.run_id,
                sa.func.count().label("evaluations"),
                sa.func.sum(sa.case((e.created_at >= recent_since, 1), else_=0)).label("recent"),
                sa.func.max(e.created_at).label("last_at"),
            )
            .group_by(e.run_id)
            .subquery("evals")
        )
        held = (
            sa.select(
                c.run_id,
                sa.func.count().label("claims"),
                sa.func.min(c.expires_at).label("expires_at"),
            )
            .group_by(c.run_id)
            .subquery("held")
        )
        query = (
            sa.select(
                r.id,
                d.name.label("device"),
                r.host,
                r.command,
                r.started_at,
                r.finished_at,
                sa.func.coalesce(evals.c.evaluations, 0).label("evaluations"),
                sa.func.coalesce(evals.c.recent, 0).label("recent"),
                evals.c.last_at,
                sa.func.coalesce(held.c.claims, 0).label("claims"),
                held.c.expires_at,
            )
            .select_from(
                runs_table.join(devices_table)
                .outerjoin(evals, evals.c.run_id == r.id)
                .outerjoin(held, held.c.run_id == r.id)
            )
            .where(*([r.started_at >= started_since] if started_since is not None else []))
            .order_by(r.id)
        )
        frame = self._frame(query, "cannot read runs")
        import pandas as pd

        now = time.time()
        frame["lease_left_s"] = [
            None if pd.isna(x) else float(x) - now for x in frame.pop("expires_at")
        ]
        for name in ("evaluations", "recent", "claims"):
            frame[name] = frame[name].astype(int)
        return frame


__all__ = ["Activity"]
