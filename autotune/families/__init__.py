"""Registry of kernel families, one module each."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

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
from autotune.families.tc_implicit_gemm import TcImplicitGemm
from autotune.families.tc_wgmma import TcWgmma
from autotune.families.tiled2d import Tiled2d
from autotune.families.winograd import Winograd

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
        Winograd(),
        TcImplicitGemm(),
        TcWgmma(),
    )
}


class UnknownFamily(KeyError):
    def __str__(self) -> str:
        known = self.args[1] if len(self.args) > 1 else FAMILIES
        return f"unknown family {self.args[0]!r} (known: {', '.join(known)})"


def get_family(name: str, registry: Mapping[str, Family] | None = None) -> Family:
    """The family of that name among the built-in ones, or in `registry` (with_directories)."""
    families = FAMILIES if registry is None else registry
    try:
        return families[name]
    except KeyError:
        raise UnknownFamily(name, tuple(families)) from None


def kernel_digests(registry: Mapping[str, Family] | None = None) -> dict[str, str]:
    """family -> the digest of its current code (Family.kernel_digest), for every family of
    the registry (the built-in ones by default): what the store's reads take as current."""
    return {name: f.kernel_digest() for name, f in (registry or FAMILIES).items()}


def with_directories(directories: Iterable[str | Path]) -> dict[str, Family]:
    """The built-in families and every family of these kernel directories; a user's family may
    not take a name already taken (a built-in one, or one of an earlier directory)."""
    from autotune.families.directory import KernelDirError, load_directory

    registry = dict(FAMILIES)
    for directory in directories:
        for family in load_directory(directory):
            if family.name in registry:
                whose = "a built-in family's" if family.name in FAMILIES else "taken"
                where = registry[family.name].directory
                raise KernelDirError(
                    f"{family.space_path}: family name {family.name!r} is {whose}"
                    + ("" if family.name in FAMILIES else f" by {where}")
                    + "; rename its files"
                )
            registry[family.name] = family
    return registry


__all__ = [
    "FAMILIES",
    "Family",
    "UnknownFamily",
    "UnsupportedProblem",
    "get_family",
    "kernel_digests",
    "with_directories",
]
