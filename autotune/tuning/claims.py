"""Study claims: one run tunes a study at a time; the others take free studies first, then wait."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from autotune.store import Store, StudyClaim

# A lease must outlast the longest gap between two recorded evaluations of a live run (a hung
# job's timeout ceiling, a worker restart, a slow compile), or a second run would take over a
# study that is still being tuned. A holder that died on this host is noticed at once instead.
CLAIM_LEASE_S = 600.0
CLAIM_POLL_S = 2.0  # how often a run waiting for another run's study looks again
RENEW_EVERY = 0.1  # renew once this fraction of the lease has passed (not on every evaluation)

T = TypeVar("T")


def host_identity() -> str:
    """This machine as other runs see it in a claim: the host name, plus the PID namespace
    where there is one, so that two containers with one host name are not mistaken for one."""
    name = socket.gethostname()
    try:
        return f"{name} pidns:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return name


def process_gone(pid: int) -> bool:
    """Whether process pid of this host has ended (a zombie counts as ended: it runs nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


def study_key(study: Any) -> tuple[str, str]:
    """(family name, problem key) of a tuner's Study."""
    return study.family.name, study.problem.key


class StudyClaims:
    """The claims of one run (one Tuner) on the studies of one device in one store."""

    def __init__(
        self,
        store: Store,
        device_id: int,
        run_id: int,
        lease_s: float = CLAIM_LEASE_S,
        poll_s: float = CLAIM_POLL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.device_id = device_id
        self.run_id = run_id
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.clock = clock
        self.host = host_identity()
        self.pid = os.getpid()
        self.waits = 0  # polls spent waiting for studies other runs held
        self._renewed: dict[tuple[str, str], float] = {}

    def take(self, key: tuple[str, str]) -> bool:
        """Claim the study (family, problem key) unless another live run holds it."""
        family, problem_key = key
        now = self.clock()
        mine = StudyClaim(self.run_id, self.host, self.pid, now + self.lease_s)
        other = self.store.claim(self.device_id, family, problem_key, mine, now)
        if other is not None and other.host == self.host and process_gone(other.pid):
            # Its holder was killed (kill -9, a crash) on this machine: no need to wait out the
            # lease. take_from names that run, so a claim taken meanwhile by a third is kept.
            other = self.store.claim(
                self.device_id, family, problem_key, mine, now, take_from=other.run_id
            )
        if other is not None:
            return False
        self._renewed[key] = now
        return True

    def renew(self, key: tuple[str, str]) -> bool:
        """Extend the lease (at most every RENEW_EVERY of it); False if the claim was lost."""
        now = self.clock()
        if now - self._renewed.get(key, float("-inf")) < RENEW_EVERY * self.lease_s:
            return True
        family, problem_key = key
        held = self.store.renew_claim(
            self.device_id, family, problem_key, self.run_id, now + self.lease_s
        )
        if held:
            self._renewed[key] = now
        else:
            self._renewed.pop(key, None)
        return held

    def release(self, key: tuple[str, str]) -> None:
        family, problem_key = key
        self._renewed.pop(key, None)
        self.store.release_claims(self.run_id, self.device_id, family, problem_key)

    def release_all(self) -> None:
        self._renewed.clear()
        self.store.release_claims(self.run_id)

    def each(
        self,
        studies: Iterable[T],
        deadline: float | None = None,
        key: Callable[[T], tuple[str, str]] = study_key,
    ) -> Iterator[T]:
        """Yield the studies one at a time, each claimed while the caller tunes it and released
        when the caller asks for the next. Studies nobody holds come first, in the given order;
        then the run waits for the others' claims to be released or to expire. Stops waiting at
        the deadline (time.monotonic())."""
        waiting = list(studies)
        while waiting:
            study = next((s for s in waiting if self.take(key(s))), None)
            if study is None:
                if deadline is not None and time.monotonic() + self.poll_s > deadline:
                    return
                self.waits += 1
                time.sleep(self.poll_s)
                continue
            waiting.remove(study)
            try:
                yield study
            finally:
                self.release(key(study))


class Unclaimed:
    """StudyClaims' interface for a run whose studies a scheduler hands out one to a worker
    (`run --ray`): nothing is written, every study is its own. A study done twice after a retry
    costs at most the evaluation in flight: the store keeps one row per configuration."""

    waits = 0

    def renew(self, key: tuple[str, str]) -> bool:
        return True

    def release_all(self) -> None:
        pass

    def each(self, studies: Iterable[T], deadline: float | None = None, key=None) -> Iterator[T]:
        yield from studies


__all__ = ["CLAIM_LEASE_S", "StudyClaims", "Unclaimed", "host_identity", "process_gone"]
