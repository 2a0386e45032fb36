"""tune_kernel's `cache=`: Kernel Tuner's cache file, kept as Kernel Tuner keeps it.

The header is written first and left open (`"cache": {`), each result is appended the moment it
is measured (`"key": {...},`), and the file is closed (`}` `}`) when the call returns; a run
that stops half-way leaves an open file, which Kernel Tuner and autotune both read as closed.
A second call with the same file continues it: entries autotune wrote under the current timing
protocol on the same device count as measured (they join the results database if it lacks
them); entries Kernel Tuner wrote stay in the file but are measured again (another timing
protocol, DESIGN section 2), and so are autotune's of other code (the kernel's digest is in
the header). A header is only rewritten over entries it describes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from autotune.kt.arguments import KernelRequest, TuneKernelError
from autotune.kt.cache import KtCacheError, read_json
from autotune.model.records import TIMING_PROTOCOL, Measurement, Status
from autotune.model.space import Config

if TYPE_CHECKING:
    from autotune.tuning.session import Session

# The header keys that say autotune wrote the file, under which timing protocol, of which code.
MARKER = "autotune_timing_protocol"
DIGEST = "autotune_kernel_digest"


def entry_key(values: Mapping[str, Any], keys: Sequence[str]) -> str:
    """Kernel Tuner's cache key: the tunables' values joined by commas, in tune_params order."""
    return ",".join(str(values[k]) for k in keys)


def cached_config(entry: Mapping[str, Any], keys: Sequence[str], space) -> Config | None:
    """The configuration of a cache entry (its values of the tunables `keys`), or None if it is
    not one of `space`'s."""
    try:
        config = Config.of({k: entry[k] for k in keys})
    except (KeyError, TypeError):
        return None
    return config if space.is_valid(config) else None


def cached_measurement(entry: Mapping[str, Any]) -> Measurement:
    """A cache entry autotune wrote, back as the Measurement it was made from."""
    time_ms = entry.get("time")
    try:
        status = Status(entry.get("status", "OK" if isinstance(time_ms, float) else "CRASH"))
    except ValueError:
        status = Status.CRASH
    error = str(entry.get("error", ""))
    if not isinstance(time_ms, int | float) or isinstance(time_ms, bool):
        return Measurement(status if not status.timed else Status.CRASH, error=error)
    samples = tuple(float(t) for t in entry.get("times") or (time_ms,))
    compile_ms = entry.get("compile_time")
    compile_s = compile_ms / 1e3 if isinstance(compile_ms, int | float) else None
    return Measurement(status, float(time_ms), samples, error=error, compile_s=compile_s)


def _plain(value: Any) -> Any:
    """JSON for NumPy scalars and arrays too (Kernel Tuner's encoder does the same)."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _header_of(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "cache"}


class CacheFile:
    """One cache file of one tune_kernel call."""

    def __init__(self, path: Path, header: dict[str, Any], kernel_digest: str) -> None:
        self.path = Path(path)
        self.header = {**header, MARKER: TIMING_PROTOCOL, DIGEST: kernel_digest}
        self.ours = True  # the entries there were measured as this call measures
        self.entries: set[str] = set()

    def open(self) -> dict[str, dict]:
        """Start the file, or continue the one there: its entries, by key, once the header is
        checked against this call's (another device, kernel, size or tunables is refused, as
        Kernel Tuner refuses it). The file is left open for appending."""
        entries: dict[str, dict] = {}
        if self.path.exists():
            if not self.path.is_file():
                raise KtCacheError(f"cache={self.path}: not a regular file")
            data = read_json(self.path)
            if not isinstance(data, dict) or not isinstance(data.get("cache"), dict):
                raise KtCacheError(f"cache={self.path}: not a Kernel Tuner cache file")
            for field in ("device_name", "kernel_name", "problem_size", "tune_params_keys"):
                if field in data and data[field] != self.header[field]:
                    raise KtCacheError(
                        f"cache={self.path} holds results for {field} {data[field]!r}, this call "
                        f"has {self.header[field]!r}: name another file"
                    )
            entries = dict(data["cache"])
            self.ours = all(data.get(k) == self.header[k] for k in (MARKER, DIGEST))
            header = self.header if self.ours or not entries else _header_of(data)
        else:
            header = self.header
        self.entries = set(entries)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({**header, "cache": {}}, indent="", default=_plain)[:-3]
        text += "".join(self._line(k, v) for k, v in entries.items())
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(self.path)
        return entries

    @staticmethod
    def _line(key: str, entry: Mapping[str, Any]) -> str:
        return "\n" + json.dumps({key: entry}, default=_plain)[1:-1] + ","

    def append(self, key: str, entry: Mapping[str, Any]) -> None:
        """Add one result now (an interrupted run keeps what it measured)."""
        with self.path.open("a") as fh:
            fh.write(self._line(key, entry))
            fh.flush()

    def close(self) -> None:
        """Close the JSON as Kernel Tuner does: the last entry's comma becomes the braces."""
        text = self.path.read_text().rstrip()
        text = text[:-1] if text.endswith(",") else text
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(text + "}\n}")
        tmp.replace(self.path)


def open_cache(request: KernelRequest, session: Session, family, problem, space) -> CacheFile:
    """The call's cache file, opened for appending; what autotune measured into it before (same
    device, same timing protocol) and the database lacks joins the database, so the call goes on
    from there."""
    size = request.problem_size
    header = {
        "device_name": session.device.name,
        "kernel_name": request.kernel_name,
        "problem_size": "callable" if callable(size) else list(size),
        "tune_params_keys": list(request.tune_params),
        "tune_params": {k: list(v) for k, v in request.tune_params.items()},
        "objective": request.objective,
    }
    digest = session.runner.kernel_digest(family)
    cache = CacheFile(request.cache, header, digest)
    try:
        entries = cache.open()
    except (KtCacheError, OSError) as err:
        raise TuneKernelError(f"tune_kernel: {err}") from None
    if not cache.ours:
        if entries and not request.quiet:
            print(
                f"tune_kernel: the {len(entries)} results in {request.cache} were measured by "
                "Kernel Tuner, under another timing protocol or of other code: they stay in it "
                "and are measured again"
            )
        return cache
    store, protocol = session.store, session.runner.protocol
    known = {
        h.config
        for h in store.evaluations(session.device_id, family.name, problem, protocol, digest)
    }
    imported = []
    for entry in entries.values():
        config = cached_config(entry, request.tune_params, space)
        if config is not None and config not in known:
            imported.append((config, cached_measurement(entry)))
    if imported:
        run = store.start_run(session.device_id, f"tune_kernel cache file {request.cache}", {})
        for config, m in imported:
            store.record(
                run, session.device_id, family.name, problem, config, m, problem.flops, digest
            )
        store.finish_run(run)
    return cache


__all__ = ["DIGEST", "MARKER", "CacheFile", "entry_key", "open_cache"]
