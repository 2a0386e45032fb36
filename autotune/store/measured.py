"""Reads of what the store measured beside the families' evaluations: the devices, their
ceilings and the libraries' baselines, each under one timing protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from autotune.model.observe import ENERGY_J, POWER_W, SM_CLOCK_MHZ, THROTTLED
from autotune.store.engine import StoreBase
from autotune.store.queries import by_shape
from autotune.store.schema import (
    SHAPE_COLUMNS,
    baseline_observations_table,
    baselines_table,
    ceilings_table,
    devices_table,
)

# A baseline's readings that its reads carry as columns (empty where it was not observed).
BASELINE_READINGS = (POWER_W, ENERGY_J, SM_CLOCK_MHZ, THROTTLED)

if TYPE_CHECKING:
    import pandas as pd


class MeasuredReads(StoreBase):
    """The devices, the newest ceiling of each, and the library baselines."""

    def devices(self) -> pd.DataFrame:
        query = sa.select(devices_table).order_by(devices_table.c.id)
        return self._frame(query, "cannot read devices")

    def ceilings(self, device: str | None = None, protocol: int | None = None) -> pd.DataFrame:
        """The newest measurement of each ceiling per device under one timing protocol: device,
        name, value, unit, detail, created_at, spread, protocol. Newest by when it was measured,
        not by id: a merged database's older ceilings arrive with higher ids."""
        c, d = ceilings_table.c, devices_table.c
        latest = (
            sa.select(c.device_id, c.name, sa.func.max(c.created_at).label("at"))
            .where(c.protocol == self._protocol(protocol))
            .group_by(c.device_id, c.name)
            .subquery()
        )
        newest = (
            sa.select(sa.func.max(c.id))
            .select_from(
                ceilings_table.join(
                    latest,
                    sa.and_(
                        c.device_id == latest.c.device_id,
                        c.name == latest.c.name,
                        c.created_at == latest.c.at,
                    ),
                )
            )
            .where(c.protocol == self._protocol(protocol))
            .group_by(c.device_id, c.name)
            .scalar_subquery()
        )
        query = (
            sa.select(
                d.name.label("device"),
                c.name,
                c.value,
                c.unit,
                c.detail,
                c.created_at,
                c.spread,
                c.protocol,
            )
            .select_from(ceilings_table.join(devices_table))
            .where(c.id.in_(newest), *([d.name == device] if device is not None else []))
            .order_by(d.name, c.name)
        )
        return self._frame(query, "cannot read ceilings")

    def baselines(
        self,
        device: str | None = None,
        library: str | None = None,
        kind: str | None = None,
        protocol: int | None = None,
    ) -> pd.DataFrame:
        """Library measurements under one timing protocol: device, library, kind, the conv2d
        columns, problem_key, shape, algorithm, version, status, error, time_ms, gflops, spread,
        protocol, and the device's readings (power_w, energy_j a run, sm_clock_mhz, throttled;
        empty where it was not observed); by device, library and shape."""
        b, d, o = baselines_table.c, devices_table.c, baseline_observations_table.c
        observed = self._has_table(baseline_observations_table)
        readings = [
            (
                sa.select(o.value).where(o.baseline_id == b.id, o.name == name).scalar_subquery()
                if observed
                else sa.null()
            ).label(name)
            for name in BASELINE_READINGS
        ]
        where = [b.protocol == self._protocol(protocol)]
        if device is not None:
            where.append(d.name == device)
        if library is not None:
            where.append(b.library == library)
        if kind is not None:
            where.append(b.kind == kind)
        query = (
            sa.select(
                d.name.label("device"),
                b.library,
                b.kind,
                *(b[n] for n in SHAPE_COLUMNS),
                b.problem_key,
                b.shape,
                b.algorithm,
                b.version,
                b.status,
                b.error,
                b.time_ms,
                b.gflops,
                b.spread,
                b.protocol,
                *readings,
            )
            .select_from(baselines_table.join(devices_table))
            .where(*where)
            .order_by(d.name, b.library, b.id)
        )
        return by_shape(self._frame(query, "cannot read baselines"), ["device", "library"])
