from __future__ import annotations

import pytest

from autotune.problem import ConvProblem, ProblemError
from autotune.shapes import collect_shapes, named_shapes, shape_set_names, shapes_from_file


def test_special_set_is_the_papers_grid():
    shapes = named_shapes("special")
    assert len(shapes) == 2 * 3 * 3
    assert {s.N for s in shapes} == {1024, 4096}
    assert {s.K for s in shapes} == {1, 3, 5}
    assert {s.F for s in shapes} == {1, 16, 64}
    assert all(s.C == 1 and s.B == 1 for s in shapes)


def test_general_set_ties_channels_to_filters():
    shapes = named_shapes("general")
    assert len(shapes) == 3 * 3 * 2
    assert all(s.C == s.F for s in shapes)
    assert {s.C for s in shapes} == {64, 256}


@pytest.mark.parametrize("name", ["alexnet", "overfeat"])
def test_network_sets_have_five_layers_of_batch_128(name):
    shapes = named_shapes(name)
    assert len(shapes) == 5
    assert all(s.B == 128 for s in shapes)
    assert shapes[0].stride == 4 and shapes[0].K == 11


def test_alexnet_conv1_pre_pads_224_to_227():
    assert named_shapes("alexnet")[0].input_size == 227


def test_overfeat_l1_needs_no_padding():
    assert named_shapes("overfeat")[0].input_size == 231


def test_unknown_set_lists_the_known_ones():
    with pytest.raises(ProblemError, match="special"):
        named_shapes("nope")
    assert "general" in shape_set_names()


def test_csv_and_toml_files(tmp_path):
    csv_file = tmp_path / "s.csv"
    csv_file.write_text("name,N,K,C,F,B\na,8,3,2,4,\nb,16,5,1,1,2\n")
    assert shapes_from_file(csv_file) == [
        ConvProblem(N=8, K=3, C=2, F=4),
        ConvProblem(N=16, K=5, C=1, F=1, B=2),
    ]
    toml_file = tmp_path / "s.toml"
    toml_file.write_text("shapes = [{ N = 8, K = 3, C = 2, F = 4, stride = 2 }]\n")
    assert shapes_from_file(toml_file) == [ConvProblem(N=8, K=3, C=2, F=4, stride=2)]


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("bad.toml", "shapes = [", "malformed TOML"),
        ("bad.csv", "N,K,C\n1,2,3\n", "lacks F"),
        ("bad.txt", "", "must end in .csv or .toml"),
        ("empty.csv", "N,K,C,F\n", "no rows"),
    ],
)
def test_bad_shape_files_get_one_line_errors(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ProblemError, match=message):
        shapes_from_file(path)


def test_collect_shapes_deduplicates_keeping_order():
    shapes = collect_shapes(("smoke",), ("N=37,K=3,C=1,F=3", "N=5,K=1,C=1,F=1"))
    assert shapes[0] == ConvProblem(N=37, K=3, C=1, F=3)
    assert shapes[-1] == ConvProblem(N=5, K=1, C=1, F=1)
    assert len(shapes) == len(set(shapes)) == 3
