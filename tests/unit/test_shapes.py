from __future__ import annotations

import pytest

from autotune.model.problem import Conv3dProblem, ConvProblem, GemmProblem, ProblemError
from autotune.model.shapes import (
    collect_shapes,
    named_shapes,
    shape_set_kinds,
    shape_set_names,
    shapes_from_file,
)


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


def test_resnet50_set_is_its_23_distinct_convolutions_at_batch_32():
    shapes = named_shapes("resnet50")
    # 1 stem 7x7, 7 distinct 3x3 (one per stage, and the stride-2 one of stages 2-4), 15 1x1.
    assert len(shapes) == len(set(shapes)) == 23
    assert all(s.B == 32 and s.dtype == "fp32" and s.layout == "NCHW" for s in shapes)
    assert sorted(s.K for s in shapes).count(1) == 15 and [s.K for s in shapes].count(3) == 7
    stem = shapes[0]
    # 224 padded by 3 is 230; a stride-2 7x7 reads 229 of it for 112 outputs.
    assert (stem.N, stem.K, stem.C, stem.F, stem.stride, stem.input_size) == (112, 7, 3, 64, 2, 229)
    keys = {s.key for s in shapes}
    assert "N=7,K=1,C=1024,F=2048,B=32,stride=2" in keys  # layer4's downsample
    assert "N=14,K=3,C=256,F=256,B=32" in keys  # layer3's 3x3
    assert "N=56,K=1,C=256,F=64,B=32" in keys  # layer1's reduce after the first block


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


def test_alexnet_fc_set_is_gemm_at_batch_1_and_128_plus_squares():
    shapes = named_shapes("alexnet_fc")
    assert all(isinstance(s, GemmProblem) for s in shapes)
    assert shape_set_kinds()["alexnet_fc"] == "gemm"
    layers = {(s.M, s.K, s.N) for s in shapes}
    for m in (1, 128):
        assert {(m, 9216, 4096), (m, 4096, 4096), (m, 4096, 1000)} <= layers
    assert {(4096, 4096, 4096), (8192, 8192, 8192)} <= layers
    assert len(shapes) == 8


def test_conv3d_set_holds_the_blogs_benchmark():
    shapes = named_shapes("conv3d")
    assert shape_set_kinds()["conv3d"] == "conv3d"
    assert Conv3dProblem(D=256, R=128, Cc=128, Kd=5, Kr=5, Kc=5) in shapes
    assert Conv3dProblem(D=64, R=64, Cc=64, Kd=3, Kr=3, Kc=3) in shapes
    assert Conv3dProblem(D=128, R=128, Cc=128, Kd=7, Kr=7, Kc=7) in shapes
    assert shape_set_kinds()["general"] == "conv2d"


def test_files_of_the_new_kinds(tmp_path):
    csv_file = tmp_path / "g.csv"
    csv_file.write_text("name,M,N,K\nfc,1,1000,4096\n")
    assert shapes_from_file(csv_file) == [GemmProblem(M=1, N=1000, K=4096)]
    toml_file = tmp_path / "c.toml"
    toml_file.write_text(
        'kind = "conv3d"\nshapes = [{ D = 9, R = 8, Cc = 7, Kd = 3, Kr = 3, Kc = 3 }]\n'
    )
    assert shapes_from_file(toml_file) == [Conv3dProblem(D=9, R=8, Cc=7, Kd=3, Kr=3, Kc=3)]
    bad = tmp_path / "bad.toml"
    bad.write_text('kind = "gemm"\nshapes = [{ N = 8, K = 3, C = 2, F = 4 }]\n')
    with pytest.raises(ProblemError, match="unknown shape field"):
        shapes_from_file(bad)


def test_collect_shapes_mixes_kinds():
    shapes = collect_shapes(("conv3d",), ("M=37,N=61,K=29", "N=5,K=1,C=1,F=1"))
    assert [s.kind for s in shapes] == ["conv3d"] * 3 + ["gemm", "conv2d"]


def test_a_csv_with_a_byte_order_mark_reads_like_one_without(tmp_path):
    # Spreadsheets (Excel's "CSV UTF-8") start the file with U+FEFF; it is not part of "N".
    path = tmp_path / "s.csv"
    path.write_bytes("N,K,C,F\n8,3,1,2\n".encode("utf-8-sig"))
    assert shapes_from_file(path) == [ConvProblem(N=8, K=3, C=1, F=2)]
