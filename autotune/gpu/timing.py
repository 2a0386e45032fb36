"""Timing protocol 2 (DESIGN section 2) as policy: how many samples, in which batches, when to
stop. The GPU session executes it; everything here runs and is tested without a GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.gpu.early_stop import EarlyStop
from autotune.model.observe import Observe
from autotune.model.records import spread

# The flush written before each sample: at least twice the L2 (DESIGN), and never less than this,
# so that it keeps the GPU busy (about 90 us on an H100) for longer than the host needs to submit
# the sample's events and launches (PyTorch's conv2d path, the longest we time, takes tens of us).
FLUSH_MIN_BYTES = 256 << 20

# How many flushes each sample is given, in turn: once, then twice, and so on. The GPU alternates
# between two states from one flush to the next, and a small kernel runs about 0.5 us slower in
# one of them (an H200, ours and cuDNN's alike: results/h200/20261202e). With one flush a sample
# a measurement's level followed the parity of all the flushes before it: every second
# measurement, whichever kernel it timed, was 4% slower on a 12 us layer. Flushed once and
# twice in turn, the samples of every measurement meet both states alike.
FLUSHES = (1, 2)


# The longest the timer waits before a configuration's samples for an SM clock held down by power
# or thermal capping to come back (gpu/observe.py's Rest). On an H200 at its 700 W limit it came
# back 0.1-0.5 s after the load stopped (results/h200/20261201g, call 1).
REST_MAX_S = 1.0


def flush_bytes(l2_bytes: int) -> int:
    """Size of the scratch buffer written before each sample on a GPU with this much L2."""
    return max(2 * l2_bytes, FLUSH_MIN_BYTES)


@dataclass(frozen=True, slots=True)
class TimingPolicy:
    """Warm-up runs, then samples until both minimums are met and the spread is low enough, or a
    maximum is reached. The minimums and maximums of time count the host's wall clock."""

    warmup: int = 3
    min_repeats: int = 10
    min_time_s: float = 0.05
    max_repeats: int = 500
    max_time_s: float = 2.0
    # A measurement whose spread (interquartile range over median) is above this keeps sampling
    # up to the maximums: its median needs more samples to be stable.
    max_spread: float = 0.05
    # Stop timing a candidate already far slower than the best so far (None: never stop early).
    early_stop: EarlyStop | None = EarlyStop()
    # What the worker observes of the device around the timed runs (NVML; gpu/observe.py). Part
    # of the policy because it travels with it to the worker, as a measurement's how.
    observe: Observe | None = None
    # Wait up to this long, before the warm-up, for a clock that power or heat held down (the
    # checked run and its float64 reference just before may have) to come back; 0: never wait.
    rest_s: float = REST_MAX_S
    # Where the clocks are observed: a measurement whose timed runs ran throttled is timed again
    # (after the rest) up to this many more times; the first one not throttled is kept, else
    # the fastest. At the power limit a measurement's own 50 ms can pull the clock down by 10-20%
    # on a big layer (results/h200/20261201g, call 2), ours or the library's alike.
    throttled_retries: int = 2

    def first_batch(self, best_ms: float | None) -> int:
        """Samples queued before the host first waits: just enough for the early stop to judge
        when it can, else the minimum count."""
        if self.early_stop is not None and best_ms is not None:
            return max(1, min(self.early_stop.after, self.max_repeats))
        return max(1, min(self.min_repeats, self.max_repeats))

    def next_batch(self, samples_ms: list[float], spent_s: float, best_ms: float | None) -> int:
        """How many more samples to queue after the ones taken (0: stop), given the wall time
        spent sampling so far."""
        taken = len(samples_ms)
        if self.early_stop is not None and self.early_stop.stops(samples_ms, best_ms):
            return 0
        if taken >= self.max_repeats or spent_s >= self.max_time_s:
            return 0
        enough = taken >= self.min_repeats and spent_s >= self.min_time_s
        noisy = (spread(samples_ms) or 0.0) > self.max_spread
        if enough and not noisy:
            return 0
        per_sample_s = max(spent_s / max(taken, 1), 1e-6)
        if enough:  # noisy: as many again
            wanted = taken
        else:
            by_time = math.ceil((self.min_time_s - spent_s) / per_sample_s)
            wanted = max(self.min_repeats - taken, by_time, 1)
        room = min(self.max_repeats - taken, math.ceil((self.max_time_s - spent_s) / per_sample_s))
        return max(1, min(wanted, room))


QUICK_TIMING = TimingPolicy(warmup=3, min_repeats=5, min_time_s=0.02)

__all__ = [
    "FLUSHES",
    "FLUSH_MIN_BYTES",
    "QUICK_TIMING",
    "REST_MAX_S",
    "TimingPolicy",
    "flush_bytes",
]
