"""Replay: a runner that answers from a recording instead of the GPU (no NVRTC, no CuPy)."""

from __future__ import annotations

import re
from pathlib import Path

from autotune.model.problem import Problem
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.runner import Prepared
from autotune.model.space import BoundSpace, Config
from autotune.replay.recorded import RecordedFamily
from autotune.replay.recording import RecordedStudy, RecordingError, load_recordings, timed

REPLAY_SUFFIX = " (replay)"  # keeps replayed rows apart from real measurements of that GPU


class ReplayMissing(RecordingError):
    """The tuner asked for a configuration the recording does not hold."""


class ReplayRunner:
    """Answers each (family, problem, config) with its recorded status and time (a Runner):
    nothing is compiled or launched. Answers are pure lookups, and one configuration is in
    flight at a time, so a replayed run is as deterministic as the strategy's seed."""

    in_order = True
    cache_error = None  # nothing is compiled
    remeasures = False  # its recording's answer again is no new measurement

    def __init__(self, studies: list[RecordedStudy]) -> None:
        if not studies:
            raise RecordingError("the recording holds no studies")
        self.studies = {(s.family, s.problem.key): s for s in studies}
        first = studies[0]
        devices = {s.device for s in studies}
        if len(devices) > 1:
            raise RecordingError(f"a replay needs one device; the recording has {sorted(devices)}")
        protocols = {s.protocol for s in studies}
        if len(protocols) > 1:
            raise RecordingError(
                f"a replay needs one timing protocol; the recording has {sorted(protocols)}"
            )
        self.protocol = first.protocol
        digits = re.sub(r"\D", "", first.arch)  # sm_90a -> 90
        self.device = DeviceInfo(
            name=first.device + REPLAY_SUFFIX,
            # A recording made elsewhere may not know the GPU's architecture.
            compute_capability=f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else "unknown",
            sm_count=first.limits.SM_COUNT,
            driver_version="replay",
            nvrtc_version=first.nvrtc,
        )
        self.limits = first.limits
        # The subspace each family was recorded over (the first study's, as they all share it).
        self.pins: dict[str, dict[str, tuple]] = {}
        for s in studies:
            if s.pins:
                self.pins.setdefault(s.family, s.pins)
        self.compiler_version = first.nvrtc or "replay"
        self.calls = 0

    @classmethod
    def from_paths(cls, *paths: str | Path) -> ReplayRunner:
        return cls(load_recordings(paths))

    def recorded_pairs(self, families=()) -> list[tuple[RecordedFamily, Problem, BoundSpace]]:
        """(family, problem, space) of the spaces recorded elsewhere (problem kind "recorded":
        no family of ours), those of `families` if given; None if there is none."""
        recorded = [s for s in self.studies.values() if s.problem.kind == "recorded"]
        if not recorded:
            return None
        unknown = set(families) - {s.family for s in recorded}
        if unknown:
            known = ", ".join(sorted({s.family for s in recorded}))
            raise RecordingError(f"the recording has no family {sorted(unknown)[0]!r} ({known})")
        return [
            (RecordedFamily(s.family), s.problem, s.space())
            for s in recorded
            if not families or s.family in families
        ]

    def study(self, family: str, problem: Problem) -> RecordedStudy | None:
        return self.studies.get((family, problem.key))

    def start(self, jobs: int) -> None:
        pass

    def stop(self) -> None:
        pass

    def kernel_digest(self, family) -> str:
        """The family's digest as it is here: a replay's rows are of the code at hand."""
        return family.kernel_digest()

    def prepare(self, study, config: Config) -> Prepared:
        return Prepared(self.recorded(study, config))

    def measure(self, study, config: Config, prepared: Prepared, **_policy) -> Measurement:
        return prepared.early

    def recorded(self, study, config: Config) -> Measurement:
        recorded = self.study(study.family.name, study.problem)
        outcome = recorded.outcomes.get(config) if recorded else None
        if outcome is None:
            where = "no study" if recorded is None else "no outcome for config " + str(config)
            raise ReplayMissing(f"the recording has {where} of {study.label}: cannot replay it")
        self.calls += 1
        if timed(outcome.status) and outcome.time_ms is not None:
            return Measurement(
                outcome.status,
                time_ms=outcome.time_ms,
                samples_ms=(outcome.time_ms,),
                protocol=self.protocol,
            )
        return Measurement(outcome.status, error=outcome.error, protocol=self.protocol)

    def close(self) -> None:
        pass


def open_replay(paths: str | Path | list, storage: str | None, share: bool = False):
    """(store, runner) for `autotune run --replay`; storage None is in memory."""
    from autotune.store import Store

    paths = paths if isinstance(paths, list | tuple) else [paths]
    runner = ReplayRunner.from_paths(*paths)
    # The replayed times keep the recording's protocol; so do the store's reads (best table).
    store = Store(storage if storage else "sqlite://", share=share, protocol=runner.protocol)
    return store, runner


__all__ = ["REPLAY_SUFFIX", "ReplayMissing", "ReplayRunner", "open_replay"]
