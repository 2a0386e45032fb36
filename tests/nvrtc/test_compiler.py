from __future__ import annotations

import random

import pytest

from autotune.compiler import CompileError, Compiler, parse_resources
from autotune.families import FAMILIES
from autotune.problem import ConvProblem
from autotune.shapes import named_shapes
from autotune.space import ARCH_LIMITS

SAMPLE_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'first' for 'sm_90'
ptxas info    : Function properties for first
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'second' for 'sm_90'
ptxas info    : Function properties for second
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 360 bytes cmem[0]
"""


def test_parse_resources_reads_every_entry():
    res = parse_resources(SAMPLE_LOG)
    assert res["first"].registers == 40
    assert res["first"].smem_bytes == 2048
    assert (res["first"].spill_stores, res["first"].spill_loads) == (8, 4)
    assert res["first"].stack_bytes == 16
    assert res["second"].registers == 12 and res["second"].smem_bytes == 0


def test_compile_error_keeps_the_log(tmp_path):
    source = tmp_path / "broken.cu"
    source.write_text('extern "C" __global__ void k(float* a) { a[0] = undefined_name; }')
    with pytest.raises(CompileError, match="undefined_name"):
        Compiler().compile_source(source, ())


def test_disk_cache_returns_the_same_cubin(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text('extern "C" __global__ void k(float* a) { a[threadIdx.x] *= SCALE; }')
    compiler = Compiler(cache_dir=tmp_path / "cache")
    first = compiler.compile_source(source, (("SCALE", 2),))
    again = compiler.compile_source(source, (("SCALE", 2),))
    other = compiler.compile_source(source, (("SCALE", 3),))
    assert not first.cached and again.cached
    assert again.cubin == first.cubin and again.resources == first.resources
    assert other.key != first.key
    source.write_text(source.read_text() + "\n// edited\n")
    assert compiler.compile_source(source, (("SCALE", 2),)).key != first.key


def _sample_problems(family):
    shapes = named_shapes(family.default_shape_set)
    odd = [ConvProblem(N=37, K=3, C=1, F=3), ConvProblem(N=29, K=5, C=7, F=9, B=2)]
    picks = []
    for p in [*shapes[:: max(1, len(shapes) // 3)], *odd]:
        try:
            family.check(p)
            picks.append(p)
        except ValueError:
            pass
    return picks


# Several shapes x 3 configs per family: minutes on a shared CPU, so out of the quick loop; each
# family's own tests compile a few configurations in it.
@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES.values()), ids=list(FAMILIES))
def test_every_family_compiles_at_sampled_configs_within_limits(family):
    compiler = Compiler(arch="sm_90")
    limits = ARCH_LIMITS["sm_90"]
    rng = random.Random(1)
    for problem in _sample_problems(family):
        bound = family.load_space().bind(problem.fields(), limits)
        assert len(bound) > 0, problem
        for config in rng.sample(bound.configs, min(3, len(bound))):
            plan = family.plan(problem, config)
            compiled = compiler.compile(plan)
            assert set(plan.entries) <= set(compiled.resources), compiled.log
            for launch in plan.all_launches:
                res = compiled.resources[launch.kernel]
                assert 0 < res.registers <= limits.REGS_PER_THREAD
                assert launch.threads <= limits.MAX_THREADS
                assert res.smem_bytes + launch.smem_bytes <= limits.SMEM_PER_BLOCK_OPTIN
            reference = compiler.compile(family.reference_plan(problem))
            assert set(family.reference_plan(problem).entries) <= set(reference.resources)
