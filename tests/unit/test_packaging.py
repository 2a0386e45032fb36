"""pyproject.toml lists the package's sub-packages (the finder cannot map kernels/ and
search_spaces/ into the package), so a sub-package added to autotune/ must be added there too."""

from __future__ import annotations

import sys
from pathlib import Path

import autotune
from autotune.families.files import INCLUDE_DIR, KERNEL_DIR, REFERENCE_DIR, SPACE_DIR

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PACKAGE = Path(autotune.__file__).parent
ROOT = PACKAGE.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_sub_package_of_autotune_is_listed() -> None:
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in PACKAGE.rglob("__init__.py")}
    assert found, PACKAGE
    assert found - set(SETUPTOOLS["packages"]) == set()


def test_the_top_level_kernels_and_spaces_are_mapped_into_the_package() -> None:
    mapping = SETUPTOOLS["package-dir"]
    assert mapping == {"autotune.kernels": "kernels", "autotune.search_spaces": "search_spaces"}
    for package, directory in mapping.items():
        assert package in SETUPTOOLS["packages"] and (ROOT / directory).is_dir()
    # In a checkout they are read where they are, beside the package.
    assert KERNEL_DIR == ROOT / "kernels" and SPACE_DIR == ROOT / "search_spaces"
    assert INCLUDE_DIR == KERNEL_DIR / "include" and REFERENCE_DIR == KERNEL_DIR / "reference"
    for sub in ("include", "reference"):
        assert f"autotune.kernels.{sub}" in SETUPTOOLS["packages"]
