"""A tune_kernel study's launch in its key and shape, and the kernel header export's choices
from a store written directly (no compiler, no GPU): current rows, functions, sizes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from autotune.kt.arguments import check_request
from autotune.kt.stored import current, kernel_bests
from autotune.kt.study import LaunchUnknown, launch, stored_kernel, study_problem
from autotune.kt.targets import TargetsError, common_best, device_target, write_targets
from autotune.model.problem import KernelProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.store import Store
from tests.unit.test_tune_kernel_args import args

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", 132, "580", "13.0", "13.0", 1980, 80 << 30)


def request(**extra):
    return check_request(args(**extra))


def test_default_launches_keep_their_keys_and_others_are_new_studies():
    plain = study_problem(request())
    assert plain.launch == "" and plain.key == KernelProblem(100, args=plain.args).key
    divided = study_problem(request(grid_div_x=["block_size_x", 2]))
    assert json.loads(divided.launch) == {"grid_div": [["block_size_x", 2], None, None]}
    assert divided.key != plain.key and divided.args == plain.args
    defined = request(defines={"BLOCK": "block_size_x", "SCALE": lambda p: 2})
    assert json.loads(launch(defined))["defines"] == {
        "BLOCK": "block_size_x",
        "SCALE": {
            "function": "test_default_launches_keep_their_keys_and_others_are_new_studies"
            ".<locals>.<lambda>"
        },
    }


def test_a_stored_launch_gives_the_same_plan_as_the_call():
    req = request(grid_div_x=["block_size_x", 2], smem_args={"size": "block_size_x * 8"})
    shape = study_problem(req).as_dict()
    plan = stored_kernel("k", shape).plan(None, Config.of({"block_size_x": 32}))
    (entry,) = plan.launches
    assert entry.grid == (2, 1, 1) and entry.block == (32, 1, 1) and entry.smem_bytes == 256
    functional = study_problem(request(grid_div_x=lambda p: 64)).as_dict()
    with pytest.raises(LaunchUnknown, match="grid_div is a Python function.*tuned_kernel"):
        stored_kernel("k", functional)


def test_current_rows_are_those_of_the_code_measured_last_or_asked():
    rows = pd.DataFrame({"kernel_digest": ["a", "a", "b"], "time_ms": [1.0, 2.0, 3.0]})
    assert list(current(rows)["time_ms"]) == [3.0]
    assert list(current(rows, "a")["time_ms"]) == [1.0, 2.0]
    assert list(current(rows, "gone")["time_ms"]) == [3.0]
    assert len(current(rows.drop(columns="kernel_digest"))) == 3  # a store without digests


def store_with(tmp_path, studies):
    """A store holding (problem, {block_size_x: time or Status}) studies of kernel k."""
    store = Store(str(tmp_path / "r.db"))
    device = store.register_device(H100)
    run = store.start_run(device, "tune_kernel k", {})
    for problem, outcomes in studies:
        for bx, outcome in outcomes.items():
            m = (
                Measurement(outcome)
                if isinstance(outcome, Status)
                else Measurement(Status.OK, time_ms=outcome, samples_ms=(outcome,))
            )
            store.record(run, device, "k", problem, Config.of({"block_size_x": bx}), m, 0)
    return store


def test_export_leaves_out_what_it_cannot_key_and_says_why(tmp_path):
    fixed = study_problem(request())
    by_expression = KernelProblem(0, args=fixed.args + ",problem_size=n", launch="")
    functional = study_problem(request(problem_size=200, grid_div_x=lambda p: 64))
    store = store_with(
        tmp_path,
        [
            (fixed, {32: 2.0, 64: 1.0, 128: Status.WRONG_RESULT}),
            (by_expression, {32: 1.0}),
            (functional, {32: 1.0, 64: 1.5}),
        ],
    )
    written, left_out = write_targets(store, tmp_path / "out")
    assert written == ["k"]
    assert [x["reason"] for x in left_out] == [
        "its problem size depends on the tunables; the header is chosen by size"
    ]
    header = (tmp_path / "out" / "k.h").read_text()
    target = device_target(H100.name)
    assert target == "NVIDIA_H100_80GB_HBM3"
    tuned = header.split(f"defined(TARGET_{target}) && defined(PROBLEM_SIZE_100)\n")[1]
    assert "#define block_size_x 64\n#define block_size_y 1" in tuned.split("#elif")[0]
    # A launch of a Python function: its tunables, and why there is no launch.
    other = header.split(f"defined(TARGET_{target}) && defined(PROBLEM_SIZE_200)\n")[1]
    other = other.split("#elif")[0]
    assert "#define block_size_x 32\n" in other and "K_GRID_X" not in other
    assert "launch not exported: its grid_div is a Python function" in other
    doc = json.loads((tmp_path / "out" / "k.json").read_text())
    chosen = {b["problem_size"]: b for b in doc["autotune"]["best"]}
    assert chosen["100"]["failures"] == 1 and chosen["100"]["evaluations"] == 3
    assert chosen["200"]["grid"] is None and "launch_unknown" in chosen["200"]
    with pytest.raises(TargetsError, match="of absent"):
        write_targets(store, tmp_path / "none", kernels=["absent"])
    store.close()


def test_the_common_best_is_the_most_frequent_top_configuration(tmp_path):
    sizes = [study_problem(request(problem_size=n)) for n in (100, 200, 300)]
    store = store_with(
        tmp_path,
        [
            (sizes[0], {32: 1.00, 64: 1.02}),  # 64 within 3% of the best
            (sizes[1], {32: 1.00, 64: 1.01}),
            (sizes[2], {64: 1.00, 128: 1.01}),
        ],
    )
    bests = kernel_bests(store)
    store.close()

    class Held:  # what common_best reads of a target
        def __init__(self, best):
            self.best = best

    assert common_best([Held(b) for b in bests]) == Config.of({"block_size_x": 64})
