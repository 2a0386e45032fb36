"""Which families to try, best first, for a shape the store does not hold (no GPU needed).

The plan choice (`lookup.Catalogue.nearest`) asks this module for an order of the families, then
borrows each family's best configuration from the nearest stored shape it was measured on. Two
rules, over the same table of what is stored (per stored shape of the call's dtype and layout,
each family's stored median and its per-call work outside the timed region there) and each
family's per-call work outside the timed region on the shape itself:

`by_evidence` (the rule in use) predicts each family's time per call on the shape and ranks by
it (then by name). The prediction is the best family's kernel time expected there over the
family's relative efficiency, plus the family's own per-call work on this shape (maxdnn's layout
conversions: on a 1x1 shape they cost far more, relative to the arithmetic, than on the 3x3 or
5x5 shapes where it was measured).
- Relative efficiency at a stored shape: the fastest family's stored median there over this
  family's (1.0: it was the fastest kernel there), among the families that can compute the
  shape being chosen for. A shape where one such family was measured compares nothing.
- A family's relative efficiency for the shape: of the shapes where it was compared, the
  `NEIGHBOURS` nearest by `family_distance`, each weighted by a Gaussian of its distance
  (`BANDWIDTH`), their weighted geometric mean shrunk towards `PRIOR` with weight
  `PRIOR_WEIGHT` (a family whose only evidence is far away gets about the prior, not the value
  of one distant shape).
- The best kernel time expected: over the `NEIGHBOURS` nearest compared shapes with the same
  weights, the geometric mean of their fastest median scaled by the two shapes' FLOPs.
The distance is over features that decide which family is fast, in octaves: the filter's K*K
(the GEMM's inner dimension grows with it), whether the filter is 1x1 (a plain GEMM, where the
families built around a filter window lose their edge), the stride, C, F, the output pixels
B*N*N (the GEMM's rows) and the batch (maxdnn's CHWN layout vectorises over it).

`by_nearest_shape` (the rule before it, kept for comparison: `autotune bench plan-choice`): the
families of the nearest stored shape by the transfer strategy's log-shape distance, fastest
there first (stored median plus per-call work there), then those of the next nearest shape, and
so on. It picked `maxdnn` for ResNet-50's 1x1 layers from a stored 3x3 neighbour, where
`implicit_gemm` was faster on every 1x1 shape it was tuned on (issue 35).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from autotune.model.problem import ConvProblem
from autotune.strategies.transfer import shape_distance

# At most this many comparative shapes per family: the nearest ones say most, and a cap keeps a
# family measured on many far shapes from outweighing one measured on a few near ones.
NEIGHBOURS = 5
# The Gaussian's width, in octaves of the features: a shape one width away counts 0.61, two
# away 0.14, three away 0.01; wider where the nearest compared shape is farther (`estimates`).
# Chosen among 1, 1.5 and 2 on `autotune bench plan-choice`'s leave-one-shape-out over the
# committed H100 results (FP32 geometric means 1.007, 1.007, 1.015; the same when a whole
# shape set is left out), so that figure is in-sample for this one constant.
BANDWIDTH = 1.5
# What a family is presumed to reach without evidence (half the best family's speed), and how
# much that presumption weighs: as much as one shape two bandwidths away.
PRIOR = 0.5
PRIOR_WEIGHT = math.exp(-2.0)
# Weights of the features (per octave, or per flag): K*K counts its octaves once (2 per octave of
# K); 1x1-ness as much as four octaves, since no stored KxK shape tells how a family does as a
# GEMM.
ONE_BY_ONE = 4.0


@dataclass(frozen=True, slots=True)
class Timed:
    """A family's stored best at one shape: its median, and its per-call work outside the timed
    region there (both in ms); `measured_on`, the key of the stored problem it was measured on
    where that is not the table's shape itself (the same sizes with an epilogue fused)."""

    time_ms: float
    untimed_ms: float = 0.0
    measured_on: str = ""

    @property
    def expected_ms(self) -> float:
        return self.time_ms + self.untimed_ms


# What is stored, per shape key: the problem and each family's stored best there.
Table = Mapping[str, tuple[ConvProblem, Mapping[str, Timed]]]
# A rule: the families of `here` (family -> its per-call work outside the timed region on the
# problem itself) in order of preference for the problem.
Ranking = Callable[[ConvProblem, Table, Mapping[str, float]], list[str]]


@dataclass(frozen=True, slots=True)
class Estimate:
    """One family's prediction for a shape: its relative efficiency (shrunk weighted geometric
    mean), the total weight of the shapes it rests on (their keys, nearest first), and its
    predicted time per call (ms)."""

    family: str
    efficiency: float
    weight: float
    shapes: tuple[str, ...]
    expected_ms: float


def features(problem: ConvProblem) -> tuple[float, ...]:
    """The coordinates `family_distance` measures in (see the module's note)."""
    p = problem
    return (
        math.log2(p.K * p.K),
        ONE_BY_ONE * (p.K == 1),
        math.log2(p.stride),
        math.log2(p.C),
        math.log2(p.F),
        math.log2(p.B * p.N * p.N),
        math.log2(p.B),
    )


def family_distance(a: ConvProblem, b: ConvProblem) -> float:
    """Euclidean distance between two shapes' `features`."""
    return math.dist(features(a), features(b))


def estimates(problem: ConvProblem, table: Table, here: Mapping[str, float]) -> list[Estimate]:
    """Every family of `here` stored somewhere in `table`, predicted for `problem`, fastest
    first (ties by name). Only the families of `here` count towards a shape's fastest time."""
    evidence: dict[str, list[tuple[float, str, float]]] = {}
    compared: list[tuple[float, str, float]] = []  # (distance, key, fastest scaled to problem)
    for key, (shape, stored) in table.items():
        times = {f: t.time_ms for f, t in stored.items() if f in here and 0 < t.time_ms < math.inf}
        for f in times:
            evidence.setdefault(f, [])
        if len(times) < 2 or key == problem.key:
            continue
        distance = family_distance(problem, shape)
        fastest = min(times.values())
        compared.append((distance, key, fastest * problem.flops / shape.flops))
        for f, t in times.items():
            evidence[f].append((distance, key, fastest / t))
    compared.sort()
    # Far from everything stored, the nearest evidence still ranks the families (not the prior).
    width = max([BANDWIDTH, *(d for d, _, _ in compared[:1])])
    best_ms = _weighted_geomean(compared[:NEIGHBOURS], width, 0.0, 1.0)
    out = []
    for family, seen in evidence.items():
        near = sorted(seen)[:NEIGHBOURS]
        efficiency = _weighted_geomean(near, width, PRIOR_WEIGHT, PRIOR)
        weight = sum(_weight(d, width) for d, _, _ in near)
        expected = best_ms / efficiency + here[family]
        out.append(Estimate(family, efficiency, weight, tuple(k for _, k, _ in near), expected))
    return sorted(out, key=lambda e: (e.expected_ms, e.family))


def by_evidence(problem: ConvProblem, table: Table, here: Mapping[str, float]) -> list[str]:
    """The rule in use (module note): families by their predicted time per call; the former
    rule's order where no stored shape compares two of them (nothing to predict from)."""
    found = estimates(problem, table, here)
    if any(math.isnan(e.expected_ms) for e in found):
        return by_nearest_shape(problem, table, here)
    return [e.family for e in found]


def by_nearest_shape(problem: ConvProblem, table: Table, here: Mapping[str, float]) -> list[str]:
    """The former rule (module note): the nearest stored shape's families fastest first, then
    the next shape's, by the transfer strategy's distance (ties by key, then by name)."""
    shapes = sorted((shape_distance(problem, p), key) for key, (p, _) in table.items())
    order: dict[str, None] = {}
    for distance, key in shapes:
        if key == problem.key or not math.isfinite(distance):
            continue
        stored = table[key][1]
        ranked = sorted((t.expected_ms, f) for f, t in stored.items() if f in here)
        for _, f in ranked:
            order.setdefault(f)
    return list(order)


def _weight(distance: float, width: float) -> float:
    return math.exp(-0.5 * (distance / width) ** 2)


def _weighted_geomean(
    values: list[tuple[float, str, float]], width: float, prior_weight: float, prior: float
) -> float:
    """exp of the weighted mean log of (distance, key, value) triples, with a prior; the
    unweighted mean where every weight is zero (shapes far beyond the bandwidth), NaN for none."""
    weights = [_weight(d, width) for d, _, _ in values]
    if not values and not prior_weight:
        return math.nan
    if sum(weights) + prior_weight == 0.0:
        weights = [1.0] * len(values)
    logs = sum(w * math.log(v) for w, (_, _, v) in zip(weights, values, strict=True))
    return math.exp((logs + prior_weight * math.log(prior)) / (sum(weights) + prior_weight))


RANKINGS: dict[str, Ranking] = {"evidence": by_evidence, "nearest-shape": by_nearest_shape}

__all__ = [
    "BANDWIDTH",
    "NEIGHBOURS",
    "PRIOR",
    "PRIOR_WEIGHT",
    "RANKINGS",
    "Estimate",
    "Ranking",
    "Table",
    "Timed",
    "by_evidence",
    "by_nearest_shape",
    "estimates",
    "family_distance",
    "features",
]
