"""The project's committed measurements, and the best configurations shipped with the package.

Committed results are campaign files: `results/campaigns/<name>.db.gz`, each a gzip'd results
database holding the runs of one campaign (`autotune data pack`), never rewritten once
committed; a new campaign adds a file. They are read as the base layer beneath the user's
database: a reading command on the default database merges every campaign file it has not
merged yet (noted in the meta table under its name and digest), so a fresh clone's `best` and
`report` work with no extra step and the user's own measurements add to them.

Each device's best configurations (not the history) ship as package data,
`autotune/data/best/<device>.json`, so a pip-installed autotune runs tuned kernels before it has
tuned anything; the runtime reads them beneath the user's database, which overrides them."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import sqlite3
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from autotune import package_path
from autotune.store.database import Store
from autotune.store.engine import StoreError
from autotune.store.merge import open_merge_source
from autotune.store.schema import (
    baselines_table,
    ceilings_table,
    evaluations_table,
    meta_table,
    repeats_table,
    runs_table,
)
from autotune.store.writes import delete_evaluations

CAMPAIGNS_DIR = Path("results") / "campaigns"  # under the repository (the working directory)
CAMPAIGN_SUFFIX = ".db.gz"
BEST_DIR = package_path("autotune", "data", "best")  # the shipped bests: <device>.json
BEST_COLUMNS = (
    "family", "kernel_digest", "problem_key", "kind", "shape", "config", "time_ms", "gflops"
)  # fmt: skip


def campaign_files(directory: Path = CAMPAIGNS_DIR) -> list[Path]:
    """The committed campaign files, oldest name first."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.endswith(CAMPAIGN_SUFFIX))


def load_campaigns(store: Store, directory: Path = CAMPAIGNS_DIR) -> list[str]:
    """Merge into `store` every campaign file of `directory` it has not merged (by name and
    content digest); returns the names merged now."""
    merged = []
    for path in campaign_files(directory):
        key = f"campaign:{path.name}"
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        with store._engine.connect() as conn:
            seen = conn.execute(
                sa.select(meta_table.c.value).where(meta_table.c.key == key)
            ).scalar_one_or_none()
        if seen == digest:
            continue
        with open_merge_source(path) as source:
            store.merge_from(source)
        with store._errors("cannot note a merged campaign"), store._engine.begin() as conn:
            conn.execute(meta_table.delete().where(meta_table.c.key == key))
            conn.execute(meta_table.insert().values(key=key, value=digest))
        merged.append(path.name)
    return merged


def pack_campaign(source: Store, output: Path, since: datetime | None = None) -> dict[str, int]:
    """Write the runs of `source` started at or after `since` (every run without it), their
    evaluations, and the baselines and ceilings measured since then, with the devices they
    name, into a new gzip'd campaign file `output` (refused if it exists: a committed campaign
    is never rewritten). Returns the rows written per table."""
    if not output.name.endswith(CAMPAIGN_SUFFIX):
        raise StoreError(f"{output}: a campaign file's name ends in {CAMPAIGN_SUFFIX}")
    if output.exists():
        raise StoreError(f"{output} exists: a committed campaign is never rewritten")
    with tempfile.TemporaryDirectory(prefix="autotune-pack-") as tmp:
        plain = Path(tmp) / "campaign.db"
        with Store(plain) as packed:
            packed.merge_from(source)
            if since is not None:
                _drop_before(packed, since)
            with packed._engine.begin() as conn:
                counts = {
                    t.name: int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar())
                    for t in (
                        runs_table,
                        evaluations_table,
                        repeats_table,
                        baselines_table,
                        ceilings_table,
                    )
                }
        _compact(plain)
        output.parent.mkdir(parents=True, exist_ok=True)
        with plain.open("rb") as raw, gzip.open(output, "wb", compresslevel=9) as out:
            shutil.copyfileobj(raw, out)
    return counts


def _drop_before(store: Store, since: datetime) -> None:
    """Take out of a packed copy what was measured before `since`: older runs with their
    evaluations (and those evaluations' readings and repeats), the repeats older runs made of
    later evaluations, older baselines and ceilings."""
    r, e = runs_table.c, evaluations_table.c
    older = sa.select(r.id).where(r.started_at < since)
    with store._engine.begin() as conn:
        delete_evaluations(conn, [e.run_id.in_(older)])
        conn.execute(repeats_table.delete().where(repeats_table.c.run_id.in_(older)))
        conn.execute(runs_table.delete().where(r.started_at < since))
        for table in (baselines_table, ceilings_table):
            conn.execute(table.delete().where(table.c.created_at < since))


def _compact(file: Path) -> None:
    """One file, no write-ahead log, no free pages: the smallest form to commit."""
    conn = sqlite3.connect(file)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("VACUUM")
    finally:
        conn.close()


def device_slug(device: str) -> str:
    """A device's name as a file name: NVIDIA H100 80GB HBM3 -> nvidia-h100-80gb-hbm3."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")


def write_best_files(store: Store, directory: Path) -> list[Path]:
    """One JSON file per device of `store` with its best configuration per (family, shape)
    under the store's protocol and current code (Store.read_current): the package data."""
    best = store.best()
    written = []
    directory.mkdir(parents=True, exist_ok=True)
    for device, rows in best.groupby("device", sort=True):
        data = {
            "device": device,
            "protocol": store.protocol,
            "rows": [_best_row(row) for _, row in rows.iterrows()],
        }
        path = directory / f"{device_slug(str(device))}.json"
        path.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
        written.append(path)
    return written


def _best_row(row: Any) -> dict[str, Any]:
    out = {name: row[name] for name in BEST_COLUMNS if name in row}
    out["time_ms"] = float(out["time_ms"])
    if "gflops" in out:
        out["gflops"] = float(out["gflops"])
    if isinstance(out.get("shape"), str):
        out["shape"] = json.loads(out["shape"])
    return out


def shipped_bests(protocol: int, directory: Path | None = None) -> dict[str, list[dict]]:
    """Every device's shipped best configurations under `protocol`, by device name."""
    folder = directory if directory is not None else BEST_DIR
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # not one of ours: nothing to start from
        if isinstance(data, dict) and data.get("protocol") == protocol and data.get("device"):
            out[str(data["device"])] = list(data.get("rows", []))
    return out


def shipped_best(device: str, protocol: int, directory: Path | None = None) -> list[dict]:
    """The best configurations shipped for `device` under `protocol` (empty when none)."""
    folder = directory if directory is not None else BEST_DIR
    path = folder / f"{device_slug(device)}.json"
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    if data.get("device") != device or data.get("protocol") != protocol:
        return []
    return list(data.get("rows", []))
