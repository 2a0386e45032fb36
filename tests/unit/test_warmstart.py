"""Warm start from other GPUs: a study whose shape the store holds only on other devices starts
at their results (seeds, and their ranking as the default model's prior)."""

from __future__ import annotations

from autotune.families import FAMILIES
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import ARCH_LIMITS
from autotune.store import Store
from autotune.strategies import DEFAULT_STRATEGY, make_strategy
from autotune.strategies.transfer import Transfer
from autotune.tuning.studies import plan_studies
from autotune.tuning.warmstart import other_devices_times, warm_start

PROBLEM = ConvProblem(N=32, K=3, C=64, F=64)


def test_a_shape_stored_only_on_other_gpus_starts_at_their_best(tmp_path) -> None:
    family = FAMILIES["implicit_gemm"]
    (study,), _ = plan_studies([(family, PROBLEM)], ARCH_LIMITS["sm_90"])
    store = Store(str(tmp_path / "r.db"))
    configs = study.space.configs[:6]
    times = {"GPU B": (0.4, 0.3, 0.1, 0.2, None, 0.5), "GPU C": (0.5, 0.4, 0.2, 0.1, None, 0.3)}
    for name, row in times.items():
        device = store.register_device(DeviceInfo(name, "8.0", 108))
        run = store.start_run(device, "test", {})
        for config, t in zip(configs, row, strict=True):
            m = (
                Measurement(Status.OK, time_ms=t, samples_ms=(t,))
                if t is not None
                else Measurement(Status.WRONG_RESULT, error="mismatch")
            )
            store.record(run, device, family.name, PROBLEM, config, m, PROBLEM.flops)
    none = tmp_path / "no-shipped-bests"  # the package's own shipped bests left out here
    others = other_devices_times(store, "GPU A", study, shipped_dir=none)
    assert [len(o) for o in others] == [6, 6] and others[0][configs[4]] is None
    assert other_devices_times(store, "GPU B", study, shipped_dir=none)[0][configs[3]] == 0.1
    strategy = warm_start(
        make_strategy(DEFAULT_STRATEGY, study.space, 0), store, "GPU A", study, shipped_dir=none
    )
    assert isinstance(strategy, Transfer) and strategy.inner._prior is not None
    # The mean rank puts configs 2 and 3 first (first and second on each), config 2 ahead on
    # the tie by order; then each GPU's best.
    asked = [strategy.ask() for _ in range(3)]
    assert asked[0] == configs[2] and set(asked) == {configs[2], configs[3]} | {asked[2]}
    assert configs[4] not in asked  # failed on both
    store.close()


def test_a_new_gpu_starts_at_another_gpus_shipped_best(tmp_path) -> None:
    import json

    family = FAMILIES["implicit_gemm"]
    (study,), _ = plan_studies([(family, PROBLEM)], ARCH_LIMITS["sm_90"])
    store = Store(str(tmp_path / "fresh.db"))  # holds nothing: a first run on this GPU
    shipped = tmp_path / "best"
    shipped.mkdir()
    chosen = study.space.configs[7]
    row = {
        "family": family.name,
        "kind": "conv2d",
        "problem_key": PROBLEM.key,
        "config": chosen.to_json(),
        "time_ms": 0.05,
        "kernel_digest": "current",
    }
    other = {"family": "chen_general", "problem_key": PROBLEM.key, "config": "{}", "time_ms": 1}
    for name, protocol in (("GPU B", 2), ("GPU C", 1)):
        data = {"device": name, "protocol": protocol, "rows": [other, row]}
        (shipped / f"{name}.json").write_text(json.dumps(data))
    (shipped / "broken.json").write_text("{not json")
    kernels = {family.name: "current"}
    others = other_devices_times(store, "GPU A", study, kernels, 2, shipped)
    assert others == [{chosen: 0.05}]  # GPU C's is of another protocol
    # Its own shipped best too: the store holds nothing of it (a pip install's first run).
    assert other_devices_times(store, "GPU B", study, kernels, 2, shipped) == [{chosen: 0.05}]
    stale = {family.name: "edited since"}
    assert other_devices_times(store, "GPU A", study, stale, 2, shipped) == []
    strategy = warm_start(
        make_strategy(DEFAULT_STRATEGY, study.space, 0),
        store,
        "GPU A",
        study,
        2,
        kernel_digest="current",
        shipped_dir=shipped,
    )
    assert isinstance(strategy, Transfer) and strategy.ask() == chosen
    store.close()


def test_a_cold_search_asks_the_familys_starting_configs_first(tmp_path) -> None:
    from autotune.model.space import Config

    family = FAMILIES["tc_wgmma"]
    # A 1x1 layer at stride 1 of 1,568 tiles: its input is a matrix, and a wave is full.
    pointwise = ConvProblem(N=56, K=1, C=64, F=256, B=32, dtype="bf16", layout="NHWC")
    # A stride-1 first layer (a strided one is rewritten as space-to-depth: whole chunks).
    first = ConvProblem(N=224, K=3, C=3, F=64, B=32, dtype="bf16", layout="NHWC")
    (study, cold_first), _ = plan_studies(
        [(family, pointwise), (family, first)], ARCH_LIMITS["sm_90"]
    )
    starting = [family.complete(Config.of(c)) for c in family.starting_configs]
    none = tmp_path / "no-shipped-bests"
    store = Store(str(tmp_path / "fresh.db"))
    strategy = warm_start(
        make_strategy(DEFAULT_STRATEGY, study.space, 0), store, "GPU A", study, shipped_dir=none
    )
    assert isinstance(strategy, Transfer)
    assert [strategy.ask() for _ in starting] == starting  # valid as they are here
    # A 3x3 layer reads through the im2col map: those reading a matrix ask their nearest.
    vgg = ConvProblem(N=112, K=3, C=128, F=128, B=32, dtype="bf16", layout="NHWC")
    ((conv3,), _) = plan_studies([(family, vgg)], ARCH_LIMITS["sm_90"])
    strategy = warm_start(
        make_strategy(DEFAULT_STRATEGY, conv3.space, 0), store, "GPU A", conv3, shipped_dir=none
    )
    asked = [strategy.ask() for _ in starting]
    assert all(conv3.space.is_valid(c) and c["GEMM_1X1"] == 0 for c in asked)
    assert [c for c in asked if c in starting] == [c for c in starting if not c["GEMM_1X1"]]
    # C = 3 has no TMA: each is replaced by its nearest valid config, the repeats dropped.
    strategy = warm_start(
        make_strategy(DEFAULT_STRATEGY, cold_first.space, 0), store, "GPU A", cold_first,
        shipped_dir=none,
    )  # fmt: skip
    asked = [strategy.ask() for _ in range(len(starting))]
    assert all(cold_first.space.is_valid(c) and c["TMA"] == 0 for c in asked)
    # After another shape's results on this device: its best first, then the starting ones.
    device = store.register_device(DeviceInfo("GPU A", "9.0", 132))
    run = store.start_run(device, "test", {})
    best = cold_first.space.configs[0]
    store.record(
        run, device, family.name, first, best,
        Measurement(Status.OK, time_ms=0.5, samples_ms=(0.5,)), first.flops,
    )  # fmt: skip
    strategy = warm_start(
        make_strategy(DEFAULT_STRATEGY, study.space, 0), store, "GPU A", study, shipped_dir=none
    )
    asked = [strategy.ask() for _ in range(1 + len(starting))]
    assert asked[1:] == starting and asked[0] not in starting and study.space.is_valid(asked[0])
    store.close()
