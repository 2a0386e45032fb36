"""Fused epilogues as part of a 2D convolution problem: the grammar, keys and stored shapes
that round-trip, shape files, buffers and the float64 reference's plan (no GPU)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.families import conv2d
from autotune.model.epilogue import EPILOGUES, GRAMMAR, EpilogueError, check_epilogue, epilogue_of
from autotune.model.parsing import parse_shape, problem_from_dict
from autotune.model.problem import ConvProblem, ProblemError
from autotune.model.shapes import collect_shapes, in_precisions, shapes_from_file

PLAIN = ConvProblem(N=13, K=3, C=40, F=33, B=3, dtype="bf16", layout="NHWC")


def test_the_grammar_holds_the_names_a_network_needs_and_reads_each_part() -> None:
    assert len(EPILOGUES) == 16  # [scale_]bias[_add][_relu|_silu|_gelu]
    for name in ("bias_relu", "bias_add_relu", "bias_silu", "bias_gelu", "scale_bias_relu"):
        assert name in EPILOGUES
    e = epilogue_of("scale_bias_add_gelu")
    assert (e.scale, e.bias, e.residual, e.activation) == (True, True, True, "gelu")
    assert e.inputs == ("scale", "bias", "residual")
    assert epilogue_of("bias") == EPILOGUES["bias"] and EPILOGUES["bias"].activation == "none"
    assert epilogue_of("") is None
    assert dict(epilogue_of("bias_add_silu").defines()) == {
        "EPILOGUE": 1,
        "EPI_SCALE": 0,
        "EPI_BIAS": 1,
        "EPI_RESIDUAL": 1,
        "EPI_ACT": 2,
    }


@pytest.mark.parametrize("bad", ["relu", "bias_relu_add", "BIAS_RELU", "bias_tanh", "add", 3])
def test_an_unknown_epilogue_is_one_line_naming_the_grammar(bad) -> None:
    with pytest.raises(ProblemError) as err:
        dataclasses.replace(PLAIN, epilogue=bad)
    text = str(err.value)
    assert "\n" not in text and repr(bad) in text and GRAMMAR in text
    with pytest.raises(ProblemError, match="unknown epilogue"):
        parse_shape(f"N=13,K=3,C=40,F=33,epilogue={bad}")


def test_a_plain_problem_keys_and_stores_as_it_always_has() -> None:
    assert PLAIN.key == "N=13,K=3,C=40,F=33,B=3,dtype=bf16,layout=NHWC"
    assert "epilogue" not in PLAIN.as_dict()
    assert PLAIN.fused is None and conv2d.epilogue_defines(PLAIN) == ()
    assert parse_shape(PLAIN.key) == PLAIN


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_keys_and_stored_shapes_round_trip(name: str) -> None:
    fused = dataclasses.replace(PLAIN, epilogue=name)
    assert fused.key == f"{PLAIN.key},epilogue={name}"
    assert parse_shape(fused.key) == fused
    assert fused.as_dict()["epilogue"] == name
    assert problem_from_dict(fused.as_dict(), "conv2d") == fused
    assert fused != PLAIN and fused.flops == PLAIN.flops  # the epilogue's work is not counted


def test_min_bytes_count_the_epilogues_inputs() -> None:
    outputs = 3 * 33 * 13 * 13
    assert dataclasses.replace(PLAIN, epilogue="bias_relu").min_bytes == PLAIN.min_bytes + 2 * 33
    both = dataclasses.replace(PLAIN, epilogue="scale_bias_add_relu").min_bytes
    assert both == PLAIN.min_bytes + 2 * (2 * 33 + outputs)


def test_shape_files_and_command_line_precisions_keep_the_epilogue(tmp_path) -> None:
    toml = tmp_path / "fused.toml"
    toml.write_text(
        'dtype = "bf16"\nlayout = "NHWC"\nepilogue = "bias_relu"\n'
        "shapes = [{N = 7, K = 3, C = 16, F = 10}, "
        '{N = 7, K = 1, C = 16, F = 10, epilogue = "bias_add_relu"}]\n'
    )
    first, second = shapes_from_file(toml)
    assert first.epilogue == "bias_relu" and second.epilogue == "bias_add_relu"
    csv = tmp_path / "fused.csv"
    csv.write_text("N,K,C,F,dtype,layout,epilogue\n7,3,16,10,bf16,NHWC,bias_gelu\n7,3,16,10,,,\n")
    fused, plain = shapes_from_file(csv)
    assert fused.epilogue == "bias_gelu" and plain == ConvProblem(N=7, K=3, C=16, F=10)
    # --dtype / --layout over a --shape that names an epilogue: every precision keeps it.
    (shape,) = collect_shapes(shapes=("N=7,K=3,C=16,F=10,epilogue=bias_silu",), dtypes=["bf16"])
    assert (shape.dtype, shape.epilogue) == ("bf16", "bias_silu")
    assert {p.epilogue for p in in_precisions([fused], ["tf32", "fp16"])} == {"bias_gelu"}
    bad = tmp_path / "bad.toml"
    bad.write_text('epilogue = "bias_rleu"\nshapes = [{N = 7, K = 3, C = 16, F = 10}]\n')
    with pytest.raises(ProblemError, match="unknown epilogue 'bias_rleu'"):
        shapes_from_file(bad)


def test_buffers_draw_the_epilogues_inputs_in_the_storage_type() -> None:
    plain = conv2d.buffers(PLAIN)
    assert [name for name, _ in plain.inputs] == ["x", "w"]
    fused = conv2d.buffers(dataclasses.replace(PLAIN, epilogue="scale_bias_add_relu"))
    assert fused.inputs[2:] == (("scale", (33,)), ("bias", (33,)), ("residual", (3, 13, 13, 33)))
    assert fused.outputs == plain.outputs and fused.dtype == "bf16"
    nchw = dataclasses.replace(PLAIN, layout="NCHW", epilogue="bias_add_relu")
    assert dict(conv2d.buffers(nchw).inputs)["residual"] == (3, 33, 13, 13)


def test_the_reference_applies_the_epilogue_after_the_plain_convolution() -> None:
    plain = conv2d.reference_plan(PLAIN)
    assert plain.source == conv2d.REFERENCE_SOURCE and len(plain.launches) == 1
    problem = dataclasses.replace(PLAIN, epilogue="bias_add_gelu")
    plan = conv2d.reference_plan(problem)
    assert plan.source == conv2d.EPILOGUE_REFERENCE_SOURCE
    conv, epilogue = plan.launches
    assert conv == plain.launches[0]
    assert epilogue.kernel == "reference_epilogue"
    assert epilogue.args == ("y_ref", "bias", "residual")
    assert dict(plan.defines)["EPI_ACT"] == 3 and dict(plan.defines)["NHWC"] == 1
    # The plain reference's text is not touched: it is part of every family's kernel digest.
    assert '#include "reference_conv2d.cu"' in conv2d.EPILOGUE_REFERENCE_SOURCE.read_text()


def test_the_numpy_epilogue_reads_channels_in_either_layout_and_each_activation() -> None:
    problem = ConvProblem(N=1, K=1, C=1, F=2, B=1, layout="NHWC", epilogue="scale_bias_add_relu")
    y = np.array([1.0, -2.0]).reshape(1, 1, 1, 2)
    extras = {
        "scale": np.array([2.0, 3.0]),
        "bias": np.array([0.5, 1.0]),
        "residual": np.array([0.25, 0.5]).reshape(1, 1, 1, 2),
    }
    got = conv2d.epilogue_numpy(problem, y, extras)
    assert got.ravel().tolist() == [2.75, 0.0]  # 1*2+0.5+0.25; -2*3+1+0.5 < 0
    nchw = dataclasses.replace(problem, layout="NCHW")
    y2 = y.reshape(1, 2, 1, 1)
    extras2 = {**extras, "residual": extras["residual"].reshape(1, 2, 1, 1)}
    assert conv2d.epilogue_numpy(nchw, y2, extras2).ravel().tolist() == [2.75, 0.0]
    one = np.ones((1, 1, 1, 2))
    zero = {"bias": np.zeros(2)}
    gelu = conv2d.epilogue_numpy(dataclasses.replace(problem, epilogue="bias_gelu"), one, zero)
    silu = conv2d.epilogue_numpy(dataclasses.replace(problem, epilogue="bias_silu"), one, zero)
    assert gelu.ravel()[0] == pytest.approx(0.8413447460685429, rel=1e-15)  # Phi(1), exact GELU
    assert silu.ravel()[0] == pytest.approx(0.7310585786300049, rel=1e-15)  # 1 / (1 + e^-1)
    assert conv2d.epilogue_numpy(PLAIN, one, {}) is one


def test_an_epilogue_is_named_from_its_parts():
    from autotune.model.epilogue import epilogue_name

    assert epilogue_name(True) == "bias"
    assert epilogue_name(True, True, "relu") == "bias_add_relu"
    assert epilogue_name(True, False, "gelu") == "bias_gelu"
    assert epilogue_name(False, True, "relu") == ""  # every named epilogue has a bias
    assert all(check_epilogue(epilogue_name(True, r, a)) for r in (0, 1) for a in ("", "silu"))
    with pytest.raises(EpilogueError, match="unknown activation"):
        epilogue_name(True, False, "tanh")
