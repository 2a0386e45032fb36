"""Registry of kernel families, one module each."""

from __future__ import annotations

from autotune.families.base import Family, UnsupportedProblem
from autotune.families.chen_general import ChenGeneral
from autotune.families.chen_special import ChenSpecial
from autotune.families.conv3d import Conv3d
from autotune.families.direct_naive import DirectNaive
from autotune.families.im2col_gemm import Im2colGemm
from autotune.families.implicit_gemm import ImplicitGemm
from autotune.families.maxdnn import MaxDnn
from autotune.families.sgemm import Sgemm
from autotune.families.smem_channels import SmemChannels
from autotune.families.tiled2d import Tiled2d

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        DirectNaive(),
        ChenSpecial(),
        ChenGeneral(),
        SmemChannels(),
        MaxDnn(),
        Sgemm(),
        Conv3d(),
        Im2colGemm(),
        ImplicitGemm(),
        Tiled2d(),
    )
}


class UnknownFamily(KeyError):
    def __str__(self) -> str:
        return f"unknown family {self.args[0]!r} (known: {', '.join(FAMILIES)})"


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise UnknownFamily(name) from None


__all__ = ["FAMILIES", "Family", "UnknownFamily", "UnsupportedProblem", "get_family"]
