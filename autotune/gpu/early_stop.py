"""Early stop in timing: when to stop timing a candidate already far slower than the best."""

from __future__ import annotations

from dataclasses import dataclass

# The rule (DESIGN section 2's protocol, with one exit): after the warm-up launches and the first
# AFTER timed samples, if the FASTEST of those samples is more than FACTOR times the study's best
# median so far, timing stops; the candidate is recorded as Status.SLOW with the samples taken
# (their median is its time_ms) and is never a best. Only the fastest early sample counts, so one
# slow outlier cannot stop a fast candidate; and since the minimum only falls as samples come,
# checking once at AFTER samples is the same as checking at every later sample.
#
# Why 4 after 3: over the 7,144 OK evaluations stored in results/autotune.db (H100, every
# family), the fastest of the first three samples was at most 2.84 times the full-protocol median
# (a 26 us kernel whose clocks were still rising); 4 leaves a margin over that, so a candidate
# that would have become the best is never stopped (tests/test_early_stop.py replays them all).
FACTOR = 4.0
AFTER = 3


@dataclass(frozen=True, slots=True)
class EarlyStop:
    factor: float = FACTOR
    after: int = AFTER

    def stops(self, samples_ms: list[float] | tuple[float, ...], best_ms: float | None) -> bool:
        """True when timing should stop now: `after` samples taken, the fastest above factor x
        best. Without a best (the study's first timed candidate) it never stops."""
        if best_ms is None or not best_ms > 0 or len(samples_ms) < self.after:
            return False
        return min(samples_ms[: self.after]) > self.factor * best_ms

    def reason(self, samples_ms: list[float] | tuple[float, ...], best_ms: float) -> str:
        fastest = min(samples_ms[: self.after])
        return (
            f"timing stopped after {self.after} samples: fastest {fastest:.4g} ms > "
            f"{self.factor:g} x best {best_ms:.4g} ms"
        )


__all__ = ["AFTER", "FACTOR", "EarlyStop"]
