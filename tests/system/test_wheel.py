"""The wheel carries every kernel and search space, so a plain (not editable) install finds them:
kernels/ and search_spaces/, at the top level of the repository, become autotune/kernels and
autotune/search_spaces inside it (pyproject.toml's package-dir mapping)."""

from __future__ import annotations

import importlib.util
import os
import site
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

import autotune
from autotune.families import FAMILIES, conv2d, conv3d, gemm, smem_channels
from autotune.model.shapes import SHAPE_SETS_FILE
from autotune.replay.subspaces import SUBSPACE_DIR
from autotune.tuning.baselines import CEILING_FMA_SOURCE, CEILING_WGMMA_SOURCE

pytestmark = pytest.mark.slow

PACKAGE = Path(autotune.__file__).parent
ROOT = PACKAGE.parent
MAPPED = ("kernels", "search_spaces")  # top-level directories the wheel carries inside autotune/


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
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)]
    if _builds_offline():
        command.insert(5, "--no-build-isolation")
    built = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (built_wheel,) = out.glob("*.whl")
    return built_wheel


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def _in_wheel(path: Path) -> str:
    relative = path.relative_to(ROOT)
    if relative.parts[0] in MAPPED:
        relative = Path("autotune", relative)
    return relative.as_posix()


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
        CEILING_WGMMA_SOURCE,
        SHAPE_SETS_FILE,
        *SUBSPACE_DIR.glob("*.toml"),
    ]
    for path in shipped:
        assert path.is_file(), path
        assert _in_wheel(path) in wheel_names, path


def test_no_data_file_of_the_package_is_left_out(wheel_names):
    roots = (PACKAGE, *(ROOT / name for name in MAPPED))
    suffixes = (".cu", ".toml", ".cuh", ".h", ".cpp")
    data = [p for root in roots for p in root.rglob("*") if p.suffix in suffixes]
    assert data
    missing = [_in_wheel(p) for p in data if _in_wheel(p) not in wheel_names]
    assert not missing, missing


# Run by the installed package, from a directory that holds no checkout: every family's kernel,
# search space and reference, and every header the kernels include, read where the wheel put them.
CHECK = textwrap.dedent(
    """
    import re, sys
    from pathlib import Path
    import autotune
    from autotune.families import FAMILIES, conv2d, conv3d, gemm, smem_channels
    from autotune.families.files import INCLUDE_DIR
    from autotune.families.headers import quoted_headers

    package = Path(autotune.__file__).parent
    assert package.is_relative_to(sys.prefix), (package, sys.prefix)
    references = [m.REFERENCE_SOURCE for m in (conv2d, conv3d, gemm, smem_channels)]
    for family in FAMILIES.values():
        for path in (family.source_path, family.space_path):
            assert path.is_relative_to(package) and path.is_file(), path
        assert family.load_space().names, family.name
        text = family.source_path.read_text()
        wanted = set(re.findall(r'^#include "([^"]+)"', text, re.M))
        found = dict(quoted_headers(text, family.source_path.parent, (INCLUDE_DIR,)))
        assert wanted <= set(found), (family.name, wanted - set(found))
    assert all(p.is_relative_to(package) and p.is_file() for p in references), references
    from autotune.gpu.cccl import DEVICE_SIDE_DIR  # CUB's device side, for users' kernels
    assert (DEVICE_SIDE_DIR / "cub" / "cub.cuh").is_file(), DEVICE_SIDE_DIR
    assert DEVICE_SIDE_DIR.is_relative_to(package), DEVICE_SIDE_DIR
    print(len(FAMILIES), "families")
    """
)


def test_an_installed_wheel_finds_every_kernel_and_space(wheel, tmp_path):
    # A fresh venv that sees this environment's packages (numpy, optuna, ...) through a .pth file
    # of plain paths, whose own .pth files (an editable install of a checkout) are not run.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dependencies = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "dependencies.pth").write_text("\n".join(dependencies) + "\n")
    # Without PYTHONPATH: pip would take a checkout on it for the installed distribution.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTOTUNE_KERNELS")}
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    installed = subprocess.run(
        [*install, "--no-deps", "--no-index", str(wheel)], env=env, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        [str(python), "-c", CHECK], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == f"{len(FAMILIES)} families"
