"""The float64 conv2d reference compiles for every storage type and layout, and the families
refuse the dtypes and layouts they do not declare."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.families import FAMILIES, conv2d
from autotune.families.base import UnsupportedProblem
from autotune.gpu.compiler import Compiler
from autotune.model.precision import DTYPES, LAYOUTS
from autotune.model.problem import ConvProblem


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_compiles_for_every_storage_and_layout(dtype, layout, tmp_path):
    problem = ConvProblem(N=7, K=3, C=5, F=3, B=2, stride=2, dtype=dtype, layout=layout)
    plan = conv2d.reference_plan(problem)
    defines = dict(plan.defines)
    assert defines["NHWC"] == (layout == "NHWC")
    assert (
        defines["STORAGE"] == {"float32": 0, "float16": 1, "bfloat16": 2}[problem.precision.storage]
    )
    compiled = Compiler(cache_dir=tmp_path).compile(plan)
    assert "reference_conv2d" in compiled.resources
    buffers = conv2d.buffers(problem)
    assert buffers.dtype == dtype
    assert dict(buffers.inputs)["x"] == problem.input_shape


def test_numpy_reference_in_nhwc_is_the_nchw_one_transposed():
    rng = np.random.default_rng(3)
    nchw = ConvProblem(N=5, K=3, C=4, F=6, B=2, stride=2)
    nhwc = ConvProblem(N=5, K=3, C=4, F=6, B=2, stride=2, layout="NHWC")
    x = rng.standard_normal(nchw.input_shape)
    w = rng.standard_normal(nchw.filter_shape)
    want = conv2d.reference_numpy(nchw, x, w)
    got = conv2d.reference_numpy(nhwc, x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1))
    assert got.shape == nhwc.output_shape
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), want, rtol=1e-12)


def test_fp32_families_refuse_other_dtypes_and_layouts_in_one_line():
    family = FAMILIES["implicit_gemm"]
    family.check(ConvProblem(N=4, K=3, C=2, F=2))
    with pytest.raises(UnsupportedProblem, match="computes fp32, not bf16"):
        family.check(ConvProblem(N=4, K=3, C=2, F=2, dtype="bf16"))
    with pytest.raises(UnsupportedProblem, match="reads NCHW tensors, not NHWC"):
        family.check(ConvProblem(N=4, K=3, C=2, F=2, layout="NHWC"))
    assert family.tolerance_for(ConvProblem(N=4, K=3, C=2, F=2)) == family.tolerance
    assert family.tolerance_for(ConvProblem(N=4, K=3, C=2, F=2, dtype="bf16")) == 5e-3
