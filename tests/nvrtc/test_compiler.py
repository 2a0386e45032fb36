from __future__ import annotations

import json
import os
import random
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.families import FAMILIES
from autotune.families.plan import KernelPlan, Launch
from autotune.gpu.compiler import CompileError, Compiler
from autotune.gpu.ptxas import parse_resources
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS

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
        if isinstance(p, ConvProblem) and p.dtype not in family.dtypes:  # a tensor-core family
            p = replace(p, dtype=family.dtypes[0], layout=family.layouts[0])
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


KERNEL = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] *= SCALE; }'


def _corrupt_json(text: str):
    def corrupt(cache: Path, key: str) -> None:
        (cache / f"{key}.json").write_text(text)

    return corrupt


def _edit_meta(**changes):
    def corrupt(cache: Path, key: str) -> None:
        path = cache / f"{key}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))

    return corrupt


def _cubin_bytes(data: bytes):
    def corrupt(cache: Path, key: str) -> None:
        (cache / f"{key}.cubin").write_bytes(data)

    return corrupt


def _symlinked_entry(cache: Path, key: str) -> None:
    """The entry replaced by links to a copy elsewhere (valid, but not a file of the cache)."""
    for suffix in (".json", ".cubin"):
        entry = cache / f"{key}{suffix}"
        elsewhere = cache.parent / f"planted{suffix}"
        elsewhere.write_bytes(entry.read_bytes())
        entry.unlink()
        entry.symlink_to(elsewhere)


CORRUPTIONS = {
    "empty-object": _corrupt_json("{}"),
    "a-list": _corrupt_json("[1, 2]"),
    "not-json": _corrupt_json("\x00\xff garbage"),
    "truncated-json": _corrupt_json('{"key": "'),
    "unexpected-resource-keys": _edit_meta(resources={"k": {"bogus": 1}}),
    "resources-not-numbers": _edit_meta(resources={"k": {"registers": "many"}}),
    "another-arch": _edit_meta(arch="sm_80"),
    "another-key": _edit_meta(key="0" * 32),
    "cubin-replaced": _cubin_bytes(b"\x7fELF" + b"planted" * 100),
    "cubin-truncated": _cubin_bytes(b"\x7fEL"),
    "symlinked-entry": _symlinked_entry,
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_corrupt_or_foreign_cache_entry_is_a_miss_and_is_overwritten(tmp_path, corrupt):
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    cache = tmp_path / "cache"
    first = Compiler(cache_dir=cache).compile_source(source, (("SCALE", 2),))
    corrupt(cache, first.key)

    compiler = Compiler(cache_dir=cache)
    again = compiler.compile_source(source, (("SCALE", 2),))
    assert not again.cached  # recompiled, not loaded
    assert again.cubin == first.cubin and again.resources == first.resources
    assert compiler.cache_error is None
    for suffix in (".json", ".cubin"):
        assert not (cache / f"{first.key}{suffix}").is_symlink()
    assert compiler.compile_source(source, (("SCALE", 2),)).cached  # the entry was rewritten
    assert sorted(p.name for p in cache.iterdir()) == [f"{first.key}.cubin", f"{first.key}.json"]


def test_writing_the_cache_never_follows_a_planted_symlink(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    cache = tmp_path / "cache"
    cache.mkdir()
    compiler = Compiler(cache_dir=cache)
    key = compiler.cache_key(KERNEL, (("SCALE", 2),))
    victim = tmp_path / "victim"
    victim.write_text("not yours")
    for suffix in (".json", ".cubin"):
        (cache / f"{key}{suffix}").symlink_to(victim)
    # Where the temporary names once were predictable (key.suffix.pid.thread.tmp).
    for suffix in (".json", ".cubin"):
        tmp_name = f"{key}{suffix}.{os.getpid()}.{threading.get_ident()}.tmp"
        (cache / tmp_name).symlink_to(victim)
    compiled = compiler.compile_source(source, (("SCALE", 2),))
    assert not compiled.cached
    assert victim.read_text() == "not yours"
    assert (cache / f"{key}.cubin").read_bytes() == compiled.cubin
    assert not (cache / f"{key}.cubin").is_symlink()


def test_a_cache_that_cannot_be_written_costs_recompiling_not_the_compile(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    (tmp_path / "file").write_text("a file, not a directory")
    compiler = Compiler(cache_dir=tmp_path / "file" / "cache")
    compiled = compiler.compile_source(source, (("SCALE", 2),))
    assert compiled.cubin.startswith(b"\x7fELF")
    assert compiler.cache_error and "file/cache" in compiler.cache_error


WGMMA_FENCE = 'extern "C" __global__ void k(float*) { asm volatile("wgmma.fence.sync.aligned;"); }'


def test_a_plan_asks_for_the_architecture_specific_target(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(WGMMA_FENCE)
    compiler = Compiler(arch="sm_90", cache_dir=tmp_path / "cache")
    assert compiler.target() == "sm_90" and compiler.target(True) == "sm_90a"
    assert Compiler(arch="sm_80").target(True) == "sm_80"  # no sm_80a: the plain target
    with pytest.raises(CompileError, match="wgmma"):  # sm_90 has no wgmma
        compiler.compile_source(source, ())
    plan = KernelPlan(source, (), (Launch("k", (1, 1, 1), (128, 1, 1), ("a",)),))
    specific = compiler.compile(replace(plan, arch_specific=True))
    assert specific.cubin.startswith(b"\x7fELF") and specific.arch == "sm_90"
    # The target is part of the cache key: the same source and defines are two entries.
    assert specific.key != compiler.cache_key(WGMMA_FENCE, ())
    assert compiler.compile(replace(plan, arch_specific=True)).cached
