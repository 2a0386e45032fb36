"""A runtime call's shape as the problem its plan computes: padding, stride, refusals (no GPU)."""

from __future__ import annotations

import pytest

pytest.importorskip("cupy")

from autotune.model.problem import ConvProblem  # noqa: E402
from autotune.runtime.plans import Call, CallError  # noqa: E402


def call(B=2, C=3, H=20, F=4, K=3, stride=1, padding=0, W=None, Cw=None, KW=None):
    return Call.of(
        (0, B, C, H, H if W is None else W, F, C if Cw is None else Cw, K,
         K if KW is None else KW, stride, padding)
    )  # fmt: skip


def test_padding_and_stride_give_pytorchs_output_size():
    # PyTorch: N = (H + 2p - K) // s + 1; the plan reads a (N - 1) * s + K input.
    assert call(H=20, K=3, padding=1).problem() == ConvProblem(N=20, K=3, C=3, F=4, B=2)
    p = call(H=224, K=11, stride=4, padding=2).problem()
    assert (p.N, p.input_size) == (55, 227)
    # A tail no window reaches is dropped: 8 + 0 - 3 = 5, stride 2 -> N = 3 over a side of 7.
    p = call(H=8, K=3, stride=2).problem()
    assert (p.N, p.input_size) == (3, 7)


def test_pytorch_pairs_and_numpy_integers_are_read_as_ints():
    import numpy as np

    c = Call.of((0, 1, 3, 9, 9, 2, 3, 3, 3, (2, 2), np.int64(1)))
    assert (c.stride, c.padding) == (2, 1)
    assert type(c.padding) is int


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(W=19), "square"),
        (dict(KW=5), "square"),
        (dict(Cw=5), "channels"),
        (dict(H=2, K=5), "larger than the padded image"),
    ],
)
def test_calls_the_kernels_cannot_serve_are_refused(kwargs, message):
    with pytest.raises(CallError, match=message):
        call(**kwargs).problem()


def test_a_runtime_serves_every_conv2d_family_and_refuses_other_kinds():
    from autotune.runtime import Runtime
    from autotune.runtime.dispatch import serves_calls

    with pytest.raises(CallError, match="sgemm computes GemmProblem problems"):
        Runtime(families=["implicit_gemm", "sgemm"])
    default = Runtime()
    # The tensor-core families serve tf32, bf16 and fp16 calls (their dtypes, NHWC).
    assert {"implicit_gemm", "tc_wgmma", "tc_implicit_gemm"} <= set(default.families)
    assert "sgemm" not in default.families and "conv3d" not in default.families
    assert all(serves_calls(family) for family in default.families.values())


def test_the_runtimes_compiles_run_outside_the_callers_process(monkeypatch):
    # A Ctrl-C during a compile in a notebook's or PyTorch's process would end it with code 4
    # (NVRTC's own signal handler): the runtime compiles in a child (test_interrupt.py).
    from autotune.runtime import Runtime, dispatch

    monkeypatch.setattr(dispatch, "device_arch", lambda device: "sm_90")
    assert Runtime().compiler(0).in_children


def test_a_calls_request_is_part_of_its_key():
    c = Call.of((0, 1, 3, 9, 9, 2, 3, 3, 3, 1, 1, "bfloat16", "NHWC", False))
    assert (c.storage, c.layout, c.allow_tf32) == ("bfloat16", "NHWC", False)
    assert c.request.dtypes == ("bf16",)
    # The problem is the sizes; the request says which dtypes and layouts may serve them.
    assert c.problem() == ConvProblem(N=9, K=3, C=3, F=2)
    with pytest.raises(CallError, match="float32, bfloat16, float16"):
        _ = Call.of((0, 1, 3, 9, 9, 2, 3, 3, 3, 1, 1, "float64", "NCHW", False)).request


def test_the_launchers_the_commands_offer_are_the_runtimes():
    from autotune.gpu.launch import LAUNCHERS
    from autotune.runtime.calls import DEFAULT_LAUNCHER, LAUNCHER_NAMES

    assert LAUNCHER_NAMES == tuple(LAUNCHERS)
    assert DEFAULT_LAUNCHER in LAUNCHERS


def test_a_calls_bias_is_an_epilogue_the_plans_family_fuses_or_leaves_to_the_caller():
    import math

    from autotune.families import get_family
    from autotune.model.space import Config
    from autotune.runtime.choice import Choice
    from autotune.runtime.plans import served_problem

    c = Call.of((0, 1, 16, 9, 9, 8, 16, 3, 3, 1, 1, "bfloat16", "NHWC", False, "bias"))
    assert c.epilogue == "bias" and c.problem().epilogue == ""  # the store keys plain sizes
    sizes = ConvProblem(N=7, K=3, C=16, F=8, dtype="bf16", layout="NHWC")
    choice = Choice("tc_wgmma", Config(()), sizes, sizes.key, 0.1, 0.0, math.nan)
    fused = served_problem(choice, get_family("tc_wgmma"), "bias")
    assert fused.epilogue == "bias" and fused.fused.inputs == ("bias",)
    assert served_problem(choice, get_family("tc_wgmma"), "") is sizes
    plain = ConvProblem(N=7, K=3, C=16, F=8)
    other = Choice("implicit_gemm", Config(()), plain, plain.key, 0.1, 0.0, math.nan)
    assert served_problem(other, get_family("implicit_gemm"), "bias") is plain  # added after


def test_a_request_names_an_epilogue_of_the_grammar():
    from autotune.runtime.calls import Request

    assert Request("bfloat16", "NHWC", epilogue="bias").epilogue == "bias"
    with pytest.raises(CallError, match="unknown epilogue"):
        Request(epilogue="bias_tanh")
