"""Rule 2 of the plan choice, the family order for a shape the store does not hold (no GPU)."""

from __future__ import annotations

import pytest

from autotune.model.problem import ConvProblem
from autotune.runtime.lookup import Catalogue, resolve
from autotune.runtime.ranking import (
    Timed,
    by_evidence,
    by_nearest_shape,
    estimates,
    family_distance,
)
from autotune.strategies.transfer import shape_distance
from tests.unit.test_runtime_lookup import LIMITS, Synthetic, config_of, space

# implicit_gemm wins on the 1x1 shapes, chen_general on the 5x5 ones; UNSEEN is 1x1, but its
# nearest stored shape by the transfer strategy's log-shape distance is a 5x5 one.
FIVE = [ConvProblem(N=28, K=5, C=256, F=256, B=32), ConvProblem(N=56, K=5, C=128, F=256, B=32)]
ONE = [ConvProblem(N=56, K=1, C=64, F=128, B=32), ConvProblem(N=112, K=1, C=64, F=512, B=32)]
UNSEEN = ConvProblem(N=28, K=1, C=256, F=256, B=32)
UNSEEN_5X5 = ConvProblem(N=28, K=5, C=128, F=256, B=32)


def record_split(synthetic: Synthetic) -> None:
    for p in FIVE:
        synthetic.record("chen_general", p, config_of("chen_general", p), 1.0)
        synthetic.record("implicit_gemm", p, config_of("implicit_gemm", p), 2.0)
    for p in ONE:
        synthetic.record("implicit_gemm", p, config_of("implicit_gemm", p), 1.0)
        synthetic.record("chen_general", p, config_of("chen_general", p), 2.0)


@pytest.fixture
def split(tmp_path):
    synthetic = Synthetic(tmp_path / "ranking.db")
    record_split(synthetic)
    return synthetic


def test_the_setting_nearest_stored_shape_is_a_5x5_one():
    nearest = min(FIVE + ONE, key=lambda p: shape_distance(UNSEEN, p))
    assert nearest == FIVE[0]
    # In the features that decide a family's speed, the 1x1 shapes are the near ones.
    assert min(FIVE + ONE, key=lambda p: family_distance(UNSEEN, p)) in ONE


def test_the_family_that_wins_on_1x1_shapes_serves_an_unseen_1x1_shape(split):
    catalogue = split.catalogue()
    table = catalogue.table(UNSEEN)
    here = {"chen_general": 0.0, "implicit_gemm": 0.0}
    # The former rule takes the nearest shape's fastest family: the 5x5 winner.
    assert by_nearest_shape(UNSEEN, table, here)[0] == "chen_general"
    assert by_evidence(UNSEEN, table, here) == ["implicit_gemm", "chen_general"]
    _, found = resolve(catalogue, UNSEEN, LIMITS, "nearest")
    choice = next(found)
    assert choice.family == "implicit_gemm" and not choice.exact
    assert space("implicit_gemm", UNSEEN).is_valid(choice.config)
    # Its configuration is borrowed from the nearest shape it was measured on (log-shape
    # distance, as the transfer strategy), here the 5x5 one.
    assert choice.measured_on == FIVE[0].key
    # Then the other family, then each family's farther shapes.
    rest = [(c.family, c.measured_on) for c in found]
    assert rest[0] == ("chen_general", FIVE[0].key)
    assert ("implicit_gemm", ONE[1].key) in rest


def test_and_the_5x5_winner_serves_an_unseen_5x5_shape(split):
    _, found = resolve(split.catalogue(), UNSEEN_5X5, LIMITS, "nearest")
    assert next(found).family == "chen_general"


def test_a_family_with_no_stored_shape_near_gets_about_the_prior():
    near = ConvProblem(N=56, K=1, C=64, F=128, B=32)
    far = ConvProblem(N=13, K=11, C=3, F=1024, B=1)
    table = {
        near.key: (near, {"a": Timed(1.0), "b": Timed(1.1)}),
        far.key: (far, {"a": Timed(3.0), "c": Timed(1.0)}),
    }
    found = {e.family: e for e in estimates(UNSEEN, table, {"a": 0.0, "b": 0.0, "c": 0.0})}
    assert found["a"].efficiency > found["b"].efficiency > found["c"].efficiency
    assert found["c"].efficiency == pytest.approx(0.5, abs=0.01)
    assert found["a"].shapes == (near.key, far.key)
    assert [e.family for e in estimates(UNSEEN, table, {"a": 0.0, "b": 0.0, "c": 0.0})] == [
        "a",
        "b",
        "c",
    ]


def test_per_call_conversions_on_the_shape_itself_count():
    # maxdnn's kernel is the faster one where it was measured, by 1.25x; on this shape its
    # layout conversions cost more than that saves, on another they would not.
    stored = ConvProblem(N=13, K=3, C=256, F=256, B=128)
    table = {stored.key: (stored, {"maxdnn": Timed(0.8, 0.01), "implicit_gemm": Timed(1.0)})}
    predicted_ms = 1.0 * UNSEEN.flops / stored.flops  # the fastest kernel's, scaled
    cheap = {"maxdnn": 0.1 * predicted_ms, "implicit_gemm": 0.0}
    costly = {"maxdnn": 0.5 * predicted_ms, "implicit_gemm": 0.0}
    assert by_evidence(UNSEEN, table, cheap) == ["maxdnn", "implicit_gemm"]
    assert by_evidence(UNSEEN, table, costly) == ["implicit_gemm", "maxdnn"]
    (first, _) = estimates(UNSEEN, table, costly)
    assert first.expected_ms == pytest.approx(predicted_ms * 0.8 / first.efficiency)


def test_ties_go_by_name_and_no_comparison_falls_back_to_the_nearest_shape():
    a = ConvProblem(N=32, K=3, C=64, F=64)
    b = ConvProblem(N=64, K=3, C=64, F=64)
    tied = {a.key: (a, {"y": Timed(1.0), "x": Timed(1.0)})}
    assert by_evidence(UNSEEN, tied, {"x": 0.0, "y": 0.0}) == ["x", "y"]
    # One family per stored shape compares nothing: the former rule's order.
    alone = {a.key: (a, {"y": Timed(1.0)}), b.key: (b, {"x": Timed(0.1)})}
    near_a = ConvProblem(N=30, K=3, C=64, F=64)
    assert by_evidence(near_a, alone, {"x": 0.0, "y": 0.0}) == ["y", "x"]
    assert by_nearest_shape(near_a, alone, {"x": 0.0, "y": 0.0}) == ["y", "x"]


def test_a_catalogue_may_be_given_the_former_rule(split):
    rows = list(split.catalogue().rows())
    former = Catalogue(rows, 3000.0, ranking=by_nearest_shape)
    assert next(former.nearest(UNSEEN, LIMITS)).family == "chen_general"
    assert len(rows) == 8
