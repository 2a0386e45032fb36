"""What every GPU correctness test asserts of the configurations it picks (tests marked gpu)."""

from __future__ import annotations

from autotune.model.records import Status


def failures(tuner, picks, min_samples: int = 1) -> list[str]:
    """Evaluate each (study, config) of `picks`; one line for each that is not OK. One that is
    OK must be within its family's tolerance and timed (at least `min_samples` samples)."""
    lines = []
    for study, config in picks:
        m = tuner.evaluate(study, config)
        if m.status is not Status.OK:
            lines.append(f"{study.label} {config}: {m.status.value} {m.error[:300]}")
        else:
            assert m.rel_error is not None and m.rel_error <= study.family.tolerance_for(
                study.problem
            )
            assert m.time_ms > 0 and len(m.samples_ms) >= min_samples
    return lines
