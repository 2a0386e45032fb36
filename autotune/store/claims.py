"""Study claims: the leases by which one run at a time tunes a study (see tuning/claims.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from autotune.store.engine import RACE_ATTEMPTS, StoreBase, StoreError
from autotune.store.schema import claims_table, devices_table

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class StudyClaim:
    """Who is tuning a study: the run, its host and process, and when its lease runs out."""

    run_id: int
    host: str
    pid: int
    expires_at: float  # Unix time in seconds


class Claims(StoreBase):
    """One run tunes a study at a time: the claims table's leases, one transaction each."""

    def claim(
        self,
        device_id: int,
        family: str,
        problem_key: str,
        holder: StudyClaim,
        now: float,
        take_from: int | None = None,
    ) -> StudyClaim | None:
        """Claim a study for holder (or renew holder's claim) in one transaction: None when
        holder has it now, else the claim of the run that holds it. A claim whose lease ran out
        before `now`, or the claim of run `take_from` (a holder known to be dead), is replaced."""
        c = claims_table.c
        study = (c.device_id == device_id, c.family == family, c.problem_key == problem_key)
        stale = c.expires_at < now
        if take_from is not None:
            stale = sa.or_(stale, c.run_id == take_from)
        row = {"device_id": device_id, "family": family, "problem_key": problem_key}
        with self._errors("cannot claim study"):
            for _ in range(RACE_ATTEMPTS):
                try:
                    with self._engine.begin() as conn:
                        # A write first: SQLite takes its write lock here, so the look and the
                        # insert below see no other process's claim in between.
                        conn.execute(claims_table.delete().where(*study, stale))
                        found = conn.execute(
                            sa.select(c.run_id, c.host, c.pid, c.expires_at).where(*study)
                        ).first()
                        if found is None:
                            values = {**row, "run_id": holder.run_id, "host": holder.host}
                            values |= {"pid": holder.pid, "expires_at": holder.expires_at}
                            conn.execute(claims_table.insert().values(**values))
                            return None
                        if found.run_id == holder.run_id:
                            conn.execute(
                                claims_table.update()
                                .where(*study)
                                .values(expires_at=holder.expires_at)
                            )
                            return None
                        return StudyClaim(found.run_id, found.host, found.pid, found.expires_at)
                except IntegrityError:
                    continue  # another process inserted its claim first (PostgreSQL): look again
            raise StoreError(f"cannot claim study {family} {problem_key} ({self.url})")

    def renew_claim(
        self, device_id: int, family: str, problem_key: str, run_id: int, expires_at: float
    ) -> bool:
        """Extend run_id's lease on a study; False if the run no longer holds it."""
        c = claims_table.c
        with self._errors("cannot renew claim"), self._engine.begin() as conn:
            result = conn.execute(
                claims_table.update()
                .where(
                    c.device_id == device_id,
                    c.family == family,
                    c.problem_key == problem_key,
                    c.run_id == run_id,
                )
                .values(expires_at=expires_at)
            )
        return result.rowcount == 1

    def release_claims(
        self,
        run_id: int,
        device_id: int | None = None,
        family: str | None = None,
        problem_key: str | None = None,
    ) -> int:
        """Drop run_id's claims (all of them, or one study's); returns how many."""
        c = claims_table.c
        where = [c.run_id == run_id]
        for column, value in ((c.device_id, device_id), (c.family, family)):
            if value is not None:
                where.append(column == value)
        if problem_key is not None:
            where.append(c.problem_key == problem_key)
        with self._errors("cannot release claims"), self._engine.begin() as conn:
            return conn.execute(claims_table.delete().where(*where)).rowcount

    def claims(self) -> pd.DataFrame:
        """The studies being tuned now: device, family, problem_key, run_id, host, pid,
        expires_at (Unix time; a lease in the past is free to take)."""
        c, d = claims_table.c, devices_table.c
        query = (
            sa.select(
                d.name.label("device"),
                c.family,
                c.problem_key,
                c.run_id,
                c.host,
                c.pid,
                c.expires_at,
            )
            .select_from(claims_table.join(devices_table))
            .order_by(c.id)
        )
        return self._frame(query, "cannot read claims")
