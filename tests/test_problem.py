from __future__ import annotations

import pytest

from autotune.problem import ConvProblem, ProblemError, parse_shape, problem_from_dict


def test_flops_count_one_multiply_add_as_two():
    p = ConvProblem(N=4, K=3, C=2, F=5, B=3)
    assert p.flops == 2 * 3 * 4 * 4 * 3 * 3 * 2 * 5


def test_input_side_includes_padding_and_stride():
    assert ConvProblem(N=55, K=11, C=3, F=64, stride=4).input_size == 227
    assert ConvProblem(N=10, K=3, C=1, F=1).input_size == 12


def test_min_bytes_reads_each_input_once_and_writes_each_output_once():
    p = ConvProblem(N=2, K=3, C=1, F=2)
    assert p.min_bytes == 4 * (1 * 1 * 4 * 4 + 2 * 1 * 3 * 3 + 1 * 2 * 2 * 2)


def test_key_shows_batch_and_stride_only_when_not_one():
    assert ConvProblem(N=8, K=3, C=4, F=2).key == "N=8,K=3,C=4,F=2"
    assert ConvProblem(N=8, K=3, C=4, F=2, B=2, stride=2).key == "N=8,K=3,C=4,F=2,B=2,stride=2"


@pytest.mark.parametrize("bad", [{"N": 0}, {"K": -1}, {"F": 2.5}, {"C": True}])
def test_impossible_sizes_are_refused(bad):
    values = {"N": 8, "K": 3, "C": 1, "F": 1, **bad}
    with pytest.raises(ProblemError):
        ConvProblem(**values)


def test_parse_shape_round_trips_the_key():
    p = ConvProblem(N=128, K=3, C=64, F=64, B=4, stride=2)
    assert parse_shape(p.key) == p
    assert parse_shape("N=128, K=3, C=64, F=64") == ConvProblem(N=128, K=3, C=64, F=64)


@pytest.mark.parametrize(
    "text, message",
    [
        ("N=1,K=3", "lacks C, F"),
        ("N=1,K=3,C=1,F=1,Q=2", "unknown shape field 'Q'"),
        ("N=x,K=3,C=1,F=1", "not an integer"),
        ("N=4,K=3,C=1,F=1,N=5", "given twice"),
        ("N4,K=3", "not NAME=VALUE"),
    ],
)
def test_parse_shape_errors_name_the_problem(text, message):
    with pytest.raises(ProblemError, match=message):
        parse_shape(text)


def test_problem_from_dict_accepts_strings_from_csv():
    assert problem_from_dict({"N": "8", "K": "3", "C": "1", "F": "2", "B": ""}) == ConvProblem(
        N=8, K=3, C=1, F=2
    )
