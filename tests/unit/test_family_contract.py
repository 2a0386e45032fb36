"""The contract every registered family keeps, checked the same way for all of them (DESIGN
section 6): three files sharing its name with its tunables spelled the same in all three, a
space that binds on every shape of its own shape set, and only configurations that can launch."""

from __future__ import annotations

import random
import re

import pytest

from autotune.families import FAMILIES
from autotune.shapes import named_shapes
from autotune.space import ARCH_LIMITS

LIMITS = ARCH_LIMITS["sm_90"]
# CUDA's limits on a launch (compute capability 9.0): block dimensions and grid dimensions.
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
SAMPLES = 300  # configurations planned per shape: spaces run to 10^5 points

FAMILY_NAMES = sorted(FAMILIES)


def _launches(plan):
    return (*plan.setup, *plan.launches, *plan.finish)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_three_files_share_the_name_and_the_tunables(name: str) -> None:
    family = FAMILIES[name]
    assert family.name == name
    assert family.source_path.is_file() and family.space_path.is_file()
    source = family.source_path.read_text()
    identifiers = set(re.findall(r"\b[A-Z][A-Z0-9_]*\b", source))
    missing = [n for n in family.load_space().names if n not in identifiers]
    assert not missing, f"{name}: tunables not used in {family.source_path.name}: {missing}"


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_every_shape_of_its_own_set_binds_and_every_config_launches(name: str) -> None:
    family = FAMILIES[name]
    rng = random.Random(name)
    for problem in named_shapes(family.default_shape_set):
        family.check(problem)
        space = family.load_space().bind(problem.fields(), LIMITS)
        assert len(space) > 0, f"{name} {problem.key}: no valid configuration"
        configs = list(space)
        for config in rng.sample(configs, min(SAMPLES, len(configs))):
            plan = family.plan(problem, config)
            assert plan.launches, f"{name} {config}: nothing timed"
            for launch in _launches(plan):
                where = f"{name} {problem.key} {config} {launch.kernel}"
                assert 0 < launch.threads <= LIMITS.MAX_THREADS, where
                assert all(0 < b <= m for b, m in zip(launch.block, MAX_BLOCK, strict=True)), where
                assert all(0 < g <= m for g, m in zip(launch.grid, MAX_GRID, strict=True)), where
                assert 0 <= launch.smem_bytes <= LIMITS.SMEM_PER_BLOCK_OPTIN, where
            buffers = family.buffers(problem)
            names = {n for n, _ in (*buffers.inputs, *buffers.outputs)} | {
                n for n, _ in plan.scratch
            }
            for launch in _launches(plan):
                unknown = [a for a in launch.args if isinstance(a, str) and a not in names]
                assert not unknown, f"{name} {config}: {launch.kernel} takes unknown {unknown}"
