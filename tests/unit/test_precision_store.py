"""A store holding fp32 and bf16 rows of the same sizes: nothing mistakes one for the other."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.export import select
from autotune.families import FAMILIES
from autotune.families.files import KERNEL_DIR, SPACE_DIR
from autotune.families.implicit_gemm import ImplicitGemm
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import ARCH_LIMITS
from autotune.runtime.lookup import Catalogue, resolve
from autotune.store import Store
from autotune.strategies import make_strategy
from autotune.strategies.transfer import transfer_seeds
from autotune.tuning.remeasure import remeasure_studies
from autotune.tuning.studies import plan_studies
from autotune.tuning.warmstart import warm_start

DEVICE = "Synthetic GPU"
LIMITS = ARCH_LIMITS["sm_90"]
A = ConvProblem(N=32, K=3, C=64, F=64)
A_BF16 = dataclasses.replace(A, dtype="bf16")
A_BF16_NHWC = dataclasses.replace(A, dtype="bf16", layout="NHWC")
A_TF32 = dataclasses.replace(A, dtype="tf32")
FAR = ConvProblem(N=128, K=3, C=128, F=128)
NEW = ConvProblem(N=30, K=3, C=60, F=64)  # nearest to A's sizes


class DualStandIn(ImplicitGemm):
    """A family that computes fp32, tf32 and bf16 in either layout: the case where only the
    problem's dtype and layout keep a bf16 plan from serving an fp32 call."""

    name = "dual_stand_in"
    dtypes = ("fp32", "tf32", "bf16")
    layouts = ("NCHW", "NHWC")

    # implicit_gemm's kernel and space, under another name.
    @property
    def source_path(self):
        return KERNEL_DIR / "implicit_gemm.cu"

    @property
    def space_path(self):
        return SPACE_DIR / "implicit_gemm.toml"


@pytest.fixture
def dual(monkeypatch):
    family = DualStandIn()
    monkeypatch.setitem(FAMILIES, family.name, family)
    return family


def configs(family, problem, count: int = 3):
    return family.load_space().bind(problem.fields(), LIMITS).configs[:count]


class Lab:
    def __init__(self, path, protocol: int | None = None) -> None:
        self.store = Store(str(path))
        self.device_id = self.store.register_device(DeviceInfo(DEVICE, "9.0", 132))
        self.run_id = self.store.start_run(self.device_id, "test", {})
        self.store.record_ceiling(self.device_id, "copy_bandwidth", 3000.0, "GB/s", "")

    def record(self, family, problem, config, time_ms, protocol=None):
        m = Measurement(Status.OK, time_ms=time_ms, samples_ms=(time_ms,))
        if protocol is not None:
            m = dataclasses.replace(m, protocol=protocol)
        self.store.record(self.run_id, self.device_id, family, problem, config, m, problem.flops)


@pytest.fixture
def lab(tmp_path, dual):
    """fp32 at A (slow) and FAR; bf16 NCHW and NHWC at A's sizes (fast)."""
    lab = Lab(tmp_path / "mixed.db")
    a, bf, bf_nhwc = configs(dual, A, 3)
    # Recorded in the reverse of the order the tables show them in.
    lab.record(dual.name, A_BF16_NHWC, bf_nhwc, 0.008)
    lab.record(dual.name, A_BF16, bf, 0.010)
    lab.record(dual.name, A, a, 0.050)
    lab.record(dual.name, A_TF32, a, 0.020)
    lab.record(dual.name, FAR, configs(dual, FAR, 1)[0], 0.500)
    yield lab
    lab.store.close()


def test_best_rows_keep_their_dtype_and_sort_fp32_first(lab) -> None:
    best = lab.store.best(device=DEVICE)
    keys = list(best["problem_key"])
    # By sizes, then dtype in the model's order (fp32, tf32, bf16, fp16; not the keys' order),
    # then layout.
    assert keys == [A.key, A_TF32.key, A_BF16.key, A_BF16_NHWC.key, FAR.key]
    shapes = dict(zip(best["problem_key"], best["shape"], strict=True))
    assert shapes[A_BF16_NHWC.key] == {**A.as_dict(), "dtype": "bf16", "layout": "NHWC"}
    assert "dtype" not in shapes[A.key]  # fp32 rows read as they always have


def test_the_runtime_serves_fp32_calls_from_fp32_plans_only(lab, dual) -> None:
    catalogue = Catalogue.from_store(lab.store, DEVICE)
    (choice,) = catalogue.stored(A)
    assert choice.time_ms == 0.050 and choice.config == configs(dual, A, 1)[0]
    # A miss nearest to A's sizes borrows from the fp32 shapes, never from the bf16 ones.
    borrowed = list(resolve(catalogue, NEW, LIMITS, "nearest")[1])
    assert borrowed and {c.measured_on for c in borrowed} <= {A.key, FAR.key}
    # Without the fp32 row at A, the nearest fp32 shape is FAR, though bf16 A is nearer.
    rows = [(p, s) for p, stored in catalogue.best.items() if p != A.key for s in stored]
    only = Catalogue([(catalogue.problems[k], s) for k, s in rows], None)
    assert {c.measured_on for c in resolve(only, NEW, LIMITS, "nearest")[1]} == {FAR.key}


def test_export_keeps_each_dtype_and_layout_apart(lab) -> None:
    chosen = select(lab.store)
    keys = [A.key, A_TF32.key, A_BF16.key, A_BF16_NHWC.key, FAR.key]
    assert sorted(e.problem.key for e in chosen.plans) == sorted(keys)
    assert chosen.excluded == ()
    times = {e.problem.key: e.time_ms for e in chosen.plans}
    # The fp32 call keeps its own plan, though bf16 at the same sizes is faster.
    assert (times[A.key], times[A_BF16.key], times[A_BF16_NHWC.key]) == (0.050, 0.010, 0.008)


def test_warm_start_does_not_seed_across_dtypes(lab, dual, tmp_path) -> None:
    """A study is seeded from the best configs of its own dtype and layout only: a bf16 tile
    made valid for fp32 would be a guess, however valid the space finds it."""

    def seeds_for(store, problem):
        (study,), _ = plan_studies([(dual, problem)], LIMITS)
        plain = make_strategy("random", study.space, 0)
        strategy = warm_start(plain, store, DEVICE, study)
        return study, (None if strategy is plain else strategy._seeds)

    a, bf, _ = configs(dual, A, 3)
    far = configs(dual, FAR, 1)[0]
    study, seeds = seeds_for(lab.store, NEW)
    assert seeds == transfer_seeds(NEW, study.space, [(A, [a]), (FAR, [far])])
    new_bf16 = dataclasses.replace(NEW, dtype="bf16")
    study, seeds = seeds_for(lab.store, new_bf16)
    assert seeds == transfer_seeds(new_bf16, study.space, [(A_BF16, [bf])])
    # An fp32 study whose family has only bf16 shapes stored gets no seeds.
    lone = Lab(tmp_path / "lone.db")
    lone.record(dual.name, A_BF16, bf, 0.010)
    assert seeds_for(lone.store, NEW)[1] is None
    lone.store.close()


def test_remeasure_rebuilds_each_dtype_and_filters_by_it(lab, dual) -> None:
    for problem, time_ms in ((A, 0.05), (A_BF16, 0.01)):
        lab.record(dual.name, problem, configs(dual, problem, 4)[3], time_ms, protocol=1)
    studies, skipped, unreadable = remeasure_studies(lab.store, DEVICE, LIMITS, top=2)
    assert not skipped and not unreadable
    assert sorted(s.problem.key for s in studies) == sorted([A.key, A_BF16.key])
    assert next(s for s in studies if s.problem.key == A_BF16.key).problem == A_BF16
    only = remeasure_studies(lab.store, DEVICE, LIMITS, top=2, dtypes=("bf16",))[0]
    assert [s.problem for s in only] == [A_BF16]
