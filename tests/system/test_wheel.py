"""The wheel carries every kernel and search space, so a plain (not editable) install finds them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import autotune
from autotune.families import FAMILIES, conv2d, conv3d, gemm, smem_channels
from autotune.model.shapes import SHAPE_SETS_FILE
from autotune.replay.subspaces import SUBSPACE_DIR
from autotune.tuning.baselines import CEILING_FMA_SOURCE

pytestmark = pytest.mark.slow

PACKAGE = Path(autotune.__file__).parent
ROOT = PACKAGE.parent


def _builds_offline() -> bool:
    """Whether this environment's setuptools can build a wheel without fetching anything."""
    try:
        import setuptools
    except ImportError:
        return False
    version = tuple(int(part) for part in setuptools.__version__.split(".")[:2])
    # bdist_wheel is part of setuptools from 70.1; before, it comes from the wheel package.
    return version >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)]
    if _builds_offline():
        command.insert(5, "--no-build-isolation")
    built = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def _in_wheel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_family_ships_its_kernel_and_search_space(wheel_names):
    for family in FAMILIES.values():
        assert _in_wheel(family.source_path) in wheel_names, family.name
        assert _in_wheel(family.space_path) in wheel_names, family.name


def test_the_references_ceiling_and_data_files_ship_too(wheel_names):
    shipped = [
        conv2d.REFERENCE_SOURCE,
        conv3d.REFERENCE_SOURCE,
        gemm.REFERENCE_SOURCE,
        smem_channels.REFERENCE_SOURCE,
        CEILING_FMA_SOURCE,
        SHAPE_SETS_FILE,
        *SUBSPACE_DIR.glob("*.toml"),
    ]
    for path in shipped:
        assert path.is_file(), path
        assert _in_wheel(path) in wheel_names, path


def test_no_data_file_of_the_package_is_left_out(wheel_names):
    data = [p for p in PACKAGE.rglob("*") if p.suffix in (".cu", ".toml", ".cuh", ".h", ".cpp")]
    assert data
    missing = [_in_wheel(p) for p in data if _in_wheel(p) not in wheel_names]
    assert not missing, missing
