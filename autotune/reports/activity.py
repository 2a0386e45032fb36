"""What the runs on a results database are doing (`autotune status`): runs, claims, recent work."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pandas as pd

from autotune.store import Store, hide_passwords

RECENT_MINUTES = 5.0


def runs_since(store: Store, since: datetime) -> pd.DataFrame:
    """The runs started at or after `since` (UTC), with their activity (see Store.run_activity)."""
    return store.run_activity(since, started_since=since)


def run_status(
    store: Store, minutes: float = RECENT_MINUTES, all_runs: bool = False
) -> pd.DataFrame:
    """The runs worth showing: unfinished ones, ones holding claims and ones that recorded
    something in the last `minutes` (every run with all_runs), with their activity."""
    recent_since = datetime.now(timezone.utc) - timedelta(minutes=minutes)
    frame = store.run_activity(recent_since)
    if not all_runs and len(frame):
        keep = frame["finished_at"].isna() | (frame["claims"] > 0) | (frame["recent"] > 0)
        frame = frame[keep].reset_index(drop=True)
    return frame


def claims_status(store: Store) -> pd.DataFrame:
    """The studies held now: run, device, family, problem_key, host, pid, lease_left_s."""
    frame = store.claims()
    frame["lease_left_s"] = frame.pop("expires_at") - time.time()
    return frame[["run_id", "device", "family", "problem_key", "host", "pid", "lease_left_s"]]


def _age(value) -> str:
    if value is None or pd.isna(value):
        return "--"
    seconds = max(0.0, _seconds_ago(value))
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def _state(run, minutes: float) -> str:
    """finished; running while a run shows signs of life (a live claim, an evaluation or its
    start within `minutes`); silent otherwise. A run killed with SIGKILL never records its end,
    and was shown as running forever."""
    if not pd.isna(run.finished_at):
        return "finished"
    alive = (not pd.isna(run.lease_left_s) and run.lease_left_s > 0) or run.recent > 0
    return "running" if alive or _seconds_ago(run.started_at) < minutes * 60 else "silent"


def _seconds_ago(value) -> float:
    when = pd.Timestamp(value)
    if when.tzinfo is None:
        when = when.tz_localize("UTC")  # SQLite keeps the UTC time without its zone
    return (pd.Timestamp.now(tz="UTC") - when).total_seconds()


def _lease(seconds) -> str:
    if seconds is None or pd.isna(seconds):
        return "--"
    return f"{seconds:.0f}s" if seconds >= 0 else f"expired {-seconds:.0f}s ago"


def format_status(runs: pd.DataFrame, claims: pd.DataFrame, minutes: float = RECENT_MINUTES) -> str:
    """Two plain-text tables: the runs, then the claims held now."""
    from autotune.reports.tables import format_table

    if runs.empty:
        text = "no active runs (none unfinished, holding a study or recording lately)\n"
    else:
        shown = pd.DataFrame(
            {
                "run": runs["id"],
                "device": runs["device"],
                "host": runs["host"],
                "state": [_state(row, minutes) for row in runs.itertuples(index=False)],
                "started": [_age(v) for v in runs["started_at"]],
                "evaluations": runs["evaluations"],
                f"last {minutes:g} min": runs["recent"],
                "last evaluation": [_age(v) for v in runs["last_at"]],
                "studies held": runs["claims"],
                "lease left": [_lease(v) for v in runs["lease_left_s"]],
                # Runs stored before passwords were masked on the way in are masked here.
                "command": [hide_passwords(str(c)) for c in runs["command"]],
            }
        )
        text = format_table(shown, "markdown") + "\n"
        if "silent" in set(shown["state"]):
            text += (
                f"\nsilent: unfinished, yet no live claim and nothing recorded for {minutes:g} "
                "min: killed (kill -9, a crash, a lost machine), or waiting for studies that "
                "other runs hold\n"
            )
    if claims.empty:
        return text + "\nno study is claimed now\n"
    held = pd.DataFrame(
        {
            "run": claims["run_id"],
            "device": claims["device"],
            "family": claims["family"],
            "shape": claims["problem_key"],
            "host": claims["host"],
            "pid": claims["pid"],
            "lease left": [_lease(v) for v in claims["lease_left_s"]],
        }
    )
    return text + "\n" + format_table(held, "markdown") + "\n"


__all__ = ["claims_status", "format_status", "run_status", "runs_since"]
