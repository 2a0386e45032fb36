"""The CUDA extras: cuda12 and cuda13 each resolve to the CuPy and NVRTC of their major, the core
dependencies pin no CUDA, and the test extra brings both NVRTC majors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import autotune

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(autotune.__file__).parent.parent
CUDA_PACKAGES = re.compile(r"^(cupy-cuda\d+x|nvidia-cuda-nvrtc(-cu\d+)?)$")
# extra -> {CUDA package: the start of the version it must resolve to}
EXPECTED = {
    "cuda13": {"cupy-cuda13x": "14.", "nvidia-cuda-nvrtc": "13.0."},
    "cuda12": {"cupy-cuda12x": "14.", "nvidia-cuda-nvrtc-cu12": "12."},
    "test": {"nvidia-cuda-nvrtc": "13.0.", "nvidia-cuda-nvrtc-cu12": "12."},
}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def test_the_core_dependencies_pin_no_cuda():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [r for r in project["dependencies"] if CUDA_PACKAGES.match(_name(r))]
    assert {"cuda12", "cuda13"} <= set(project["optional-dependencies"])


@pytest.mark.slow
@pytest.mark.parametrize("extra", sorted(EXPECTED))
def test_each_extra_resolves_to_its_cuda_major(extra, tmp_path):
    # A dry run against the package index: resolves what `pip install .[extra]` would install,
    # installs nothing (no GPU needed).
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q"]
    command += ["--report", str(report), f"{ROOT}[{extra}]"]
    resolved = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    versions = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}
    cuda = {name: v for name, v in versions.items() if CUDA_PACKAGES.match(name)}
    assert set(cuda) == set(EXPECTED[extra]), cuda
    for name, start in EXPECTED[extra].items():
        assert cuda[name].startswith(start), (name, cuda[name])
