from __future__ import annotations

import pytest

from autotune.model.parsing import parse_shape, problem_from_dict
from autotune.model.problem import Conv3dProblem, ConvProblem, GemmProblem, ProblemError


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


def test_gemm_counts_and_key():
    p = GemmProblem(M=2, N=3, K=5)
    assert p.kind == "gemm"
    assert p.flops == 2 * 2 * 3 * 5
    assert p.min_bytes == 4 * (2 * 5 + 5 * 3 + 2 * 3)
    assert p.key == "M=2,N=3,K=5"
    assert p.fields() == p.as_dict() == {"M": 2, "N": 3, "K": 5}
    assert (p.a_shape, p.b_shape, p.c_shape) == ((2, 5), (5, 3), (2, 3))


def test_conv3d_output_sides_counts_and_key():
    p = Conv3dProblem(D=10, R=8, Cc=6, Kd=3, Kr=2, Kc=1)
    assert p.kind == "conv3d"
    assert (p.OD, p.OR, p.OC) == (8, 7, 6)
    assert p.output_shape == (8, 7, 6)
    assert p.flops == 2 * 8 * 7 * 6 * 3 * 2 * 1
    assert p.min_bytes == 4 * (10 * 8 * 6 + 3 * 2 * 1 + 8 * 7 * 6)
    assert p.key == "D=10,R=8,Cc=6,Kd=3,Kr=2,Kc=1"
    assert p.fields() == {**p.as_dict(), "OD": 8, "OR": 7, "OC": 6}


def test_conv3d_refuses_a_filter_larger_than_the_input():
    assert Conv3dProblem(D=3, R=3, Cc=3, Kd=3, Kr=3, Kc=3).output_shape == (1, 1, 1)
    with pytest.raises(ProblemError, match="Kr=5 is larger than the input R=4"):
        Conv3dProblem(D=8, R=4, Cc=8, Kd=3, Kr=5, Kc=3)


@pytest.mark.parametrize(
    "cls, values",
    [
        (GemmProblem, {"M": 0, "N": 1, "K": 1}),
        (GemmProblem, {"M": 1, "N": 1.5, "K": 1}),
        (GemmProblem, {"M": 1, "N": 1, "K": False}),
        (Conv3dProblem, {"D": 4, "R": 4, "Cc": 4, "Kd": 0, "Kr": 1, "Kc": 1}),
        (Conv3dProblem, {"D": -4, "R": 4, "Cc": 4, "Kd": 1, "Kr": 1, "Kc": 1}),
    ],
)
def test_new_kinds_refuse_impossible_sizes(cls, values):
    with pytest.raises(ProblemError):
        cls(**values)


def test_parse_shape_tells_the_kind_from_the_field_names():
    assert parse_shape("M=1,N=4096,K=9216") == GemmProblem(M=1, N=4096, K=9216)
    c3 = Conv3dProblem(D=256, R=128, Cc=128, Kd=5, Kr=5, Kc=5)
    assert parse_shape(c3.key) == c3
    assert parse_shape("N=8,K=3,C=1,F=1").kind == "conv2d"
    assert parse_shape(GemmProblem(M=3, N=4, K=5).key, kind="gemm") == GemmProblem(3, 4, 5)


@pytest.mark.parametrize(
    "text, message",
    [
        ("M=1,N=2", "lacks K"),
        ("M=1,N=2,K=3,C=4", "unknown shape field 'C' for a gemm shape"),
        ("D=4,R=4,Cc=4,Kd=3,Kr=3", "lacks Kc"),
        ("D=4,R=4,Cc=4,Kd=5,Kr=3,Kc=3", "larger than the input"),
        ("M=x,N=1,K=1", "not an integer"),
    ],
)
def test_parse_shape_errors_for_new_kinds(text, message):
    with pytest.raises(ProblemError, match=message):
        parse_shape(text)


def test_problem_from_dict_takes_an_explicit_kind():
    assert problem_from_dict({"M": "4", "N": 5, "K": 6}) == GemmProblem(M=4, N=5, K=6)
    with pytest.raises(ProblemError, match="unknown problem kind"):
        problem_from_dict({"N": 1, "K": 1}, kind="conv4d")
    with pytest.raises(ProblemError, match="unknown shape field"):
        problem_from_dict({"N": 1, "K": 1, "C": 1, "F": 1}, kind="gemm")


def test_dtype_and_layout_join_the_key_only_when_not_the_default():
    plain = ConvProblem(N=13, K=3, C=384, F=256, B=128)
    assert plain.key == "N=13,K=3,C=384,F=256,B=128"
    assert plain.as_dict() == {"N": 13, "K": 3, "C": 384, "F": 256, "B": 128, "stride": 1}
    tc = ConvProblem(N=13, K=3, C=384, F=256, B=128, dtype="bf16", layout="NHWC")
    assert tc.key == "N=13,K=3,C=384,F=256,B=128,dtype=bf16,layout=NHWC"
    assert parse_shape(tc.key) == tc
    assert problem_from_dict(tc.as_dict()) == tc
    assert ConvProblem(N=1, K=1, C=1, F=1, dtype="tf32").key == "N=1,K=1,C=1,F=1,dtype=tf32"


def test_layout_orders_the_tensors_and_dtype_sizes_the_bytes():
    p = ConvProblem(N=2, K=3, C=5, F=7, B=11, layout="NHWC", dtype="fp16")
    assert p.input_shape == (11, 4, 4, 5)
    assert p.filter_shape == (7, 3, 3, 5)
    assert p.output_shape == (11, 2, 2, 7)
    assert p.min_bytes == 2 * (11 * 5 * 16 + 7 * 5 * 9 + 11 * 7 * 4)
    fields = p.fields()
    assert (fields["ELEM_BYTES"], fields["TENSOR_CORE"], fields["NHWC"]) == (2, 1, 1)
    assert all(isinstance(v, int) for v in fields.values())
    assert p.precision.tolerance > ConvProblem(N=2, K=3, C=5, F=7).precision.tolerance


@pytest.mark.parametrize(
    "text, message",
    [
        ("N=4,K=3,C=1,F=1,dtype=fp64", "unknown dtype 'fp64'"),
        ("N=4,K=3,C=1,F=1,layout=CHWN", "unknown layout 'CHWN'"),
        ("M=4,N=3,K=1,dtype=bf16", "unknown shape field 'dtype'"),
    ],
)
def test_unknown_dtypes_and_layouts_are_one_line_errors(text, message):
    with pytest.raises(ProblemError, match=message):
        parse_shape(text)


def test_a_stored_dtype_must_be_a_name():
    with pytest.raises(ProblemError, match="is not a name"):
        problem_from_dict({"N": 4, "K": 3, "C": 1, "F": 1, "dtype": 16})


def test_padding_is_read_as_zeros_around_a_smaller_input_and_named_in_the_key_after_stride():
    p = ConvProblem(N=28, K=3, C=128, F=128, B=32, stride=2, dtype="bf16", layout="NHWC", padding=1)
    assert p.input_size == 55 and p.input_shape == (32, 55, 55, 128)
    assert p.key == "N=28,K=3,C=128,F=128,B=32,stride=2,padding=1,dtype=bf16,layout=NHWC"
    assert parse_shape(p.key) == p and problem_from_dict(p.as_dict()) == p
    assert p.fields()["PADDING"] == 1 and p.fields()["S"] == 55
    assert p.flops == ConvProblem(N=28, K=3, C=128, F=128, B=32, stride=2).flops  # zeros count
    # Padding 0, the default: the pre-padded problem, its key and dict as they always were.
    plain = ConvProblem(N=28, K=3, C=128, F=128, B=32, stride=2)
    assert "padding" not in plain.key and "padding" not in plain.as_dict()
    assert plain.input_size == 57


def test_a_tail_is_input_past_the_last_window_and_named_in_the_key_after_padding():
    # ResNet-50's stride-2 3x3 over 56: windows from -1 step 2 to the 28th at 53 reach the
    # image's last row, 55; the zero row after it (the padding's) is in no window.
    p = ConvProblem(N=28, K=3, C=128, F=128, B=32, stride=2, dtype="bf16", padding=1, tail=1)
    assert p.input_size == 56 and p.input_shape == (32, 128, 56, 56)
    assert p.key == "N=28,K=3,C=128,F=128,B=32,stride=2,padding=1,tail=1,dtype=bf16"
    assert parse_shape(p.key) == p and problem_from_dict(p.as_dict()) == p
    assert p.fields()["S"] == 56 and p.flops == ConvProblem(N=28, K=3, C=128, F=128, B=32).flops
    # Its 1x1 downsampling twin, with no padding: rows 0, 2, ..., 54 of 56.
    assert ConvProblem(N=28, K=1, C=256, F=512, stride=2, tail=1).input_size == 56
    assert "tail" not in ConvProblem(N=28, K=1, C=256, F=512, stride=2).key
    # Pre-padded: neither padding nor tail, the input every family reads.
    assert ConvProblem(N=28, K=1, C=256, F=512, stride=2).pre_padded and not p.pre_padded
    assert not ConvProblem(N=28, K=1, C=256, F=512, stride=2, tail=1).pre_padded


@pytest.mark.parametrize(
    "stride, tail, message",
    [(2, 2, "0 to stride - 1 = 1"), (1, 1, "0 to stride - 1 = 0"), (2, -1, "from 0"),
     (2, True, "integer"), (4, 1.0, "integer")],
)  # fmt: skip
def test_impossible_tails_are_refused(stride, tail, message):
    with pytest.raises(ProblemError, match=message):
        ConvProblem(N=7, K=3, C=4, F=4, stride=stride, tail=tail)


@pytest.mark.parametrize(
    "padding, message",
    [(-1, "at least 0"), (3, "less than K=3"), (True, "must be an integer"), (1.0, "integer")],
)
def test_impossible_padding_is_refused(padding, message):
    with pytest.raises(ProblemError, match=message):
        ConvProblem(N=8, K=3, C=4, F=4, padding=padding)


def test_only_a_family_that_reads_padding_takes_a_padded_problem():
    from autotune.families import FAMILIES, UnsupportedProblem

    padded = ConvProblem(N=14, K=3, C=64, F=64, B=2, dtype="bf16", layout="NHWC", padding=1)
    readers = []
    for family in FAMILIES.values():
        try:
            family.check(padded)
        except UnsupportedProblem as err:
            if family.reads_padding:
                raise
            if family.layouts == ("NHWC",) and "bf16" in family.dtypes:
                assert "pre-padded input" in str(err), (family.name, str(err))
        else:
            readers.append(family.name)
    assert readers == ["tc_wgmma"]
