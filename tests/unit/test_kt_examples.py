"""`autotune bench kt-examples` without running an example: the classification, the rewriting of a
script's imports, the synthetic session's outputs, and the command's bad input."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from autotune.bench import kt_examples
from autotune.bench.kt_example_run import rewrite
from autotune.gpu.given import GivenCheck, argument_arrays, write_arguments
from autotune.gpu.synthetic import SyntheticSession
from autotune.gpu.timing import TimingPolicy

NEEDS = {"kernel_tuner", "gpu", "observers"}


def test_every_example_is_classified_with_a_reason_where_out_of_scope() -> None:
    every = kt_examples.classification()
    assert len(every) == 33  # examples/cuda/*.py of Kernel Tuner's 1.4.0 release
    assert all(e.name.endswith(".py") for e in every)
    assert all(e.reason for e in every if not e.in_scope)
    assert all(set(e.needs) <= NEEDS for e in every)
    assert all(e.reason for e in every if "gpu" in e.needs)  # the skip line says why
    assert sum(e.in_scope for e in every) == 19


def test_the_classification_names_the_examples_directory_s_scripts() -> None:
    directory = kt_examples.examples_dir(None)
    if directory is None:
        pytest.skip(f"{kt_examples.ENV} is not set (Kernel Tuner's examples/cuda)")
    on_disk = {p.name for p in directory.glob("*.py")}
    assert on_disk == {e.name for e in kt_examples.classification()}


def test_an_in_scope_example_needs_kernel_tuner_exactly_where_its_rewrite_leaves_some() -> None:
    # The classification's "kernel_tuner" need, held to what the rewrite leaves on Kernel Tuner.
    directory = kt_examples.examples_dir(None)
    if directory is None:
        pytest.skip(f"{kt_examples.ENV} is not set (Kernel Tuner's examples/cuda)")
    for example in kt_examples.classification():
        if example.in_scope:
            left = rewrite((directory / example.name).read_text()).kernel_tuner_left
            assert bool(left) == ("kernel_tuner" in example.needs), (example.name, left)


def test_the_entry_points_and_observers_move_to_autotune() -> None:
    script = "\n".join(
        [
            "import numpy",
            "from kernel_tuner import tune_kernel, run_kernel",
            "from kernel_tuner.observers.nvml import NVMLObserver",
            "from kernel_tuner.util import get_config_string",
            "from kernel_tuner.accuracy import TunablePrecision, AccuracyObserver",
            "def go():",
            "    return tune_kernel('k', 'src', 1, [], {})",
        ]
    )
    out = rewrite(script)
    lines = out.text.split("\n")
    assert lines[1:5] == [
        "from autotune import tune_kernel, run_kernel",
        "from autotune import NVMLObserver",
        "from kernel_tuner.util import get_config_string",
        # Output observers are the caller's code: Kernel Tuner's own are passed to ours.
        "from kernel_tuner.accuracy import TunablePrecision, AccuracyObserver",
    ]
    assert out.changed == 2
    assert out.autotune_names == ("tune_kernel", "run_kernel", "NVMLObserver")
    assert out.kernel_tuner_left == (
        "kernel_tuner.util.get_config_string",
        "kernel_tuner.accuracy.TunablePrecision",
        "kernel_tuner.accuracy.AccuracyObserver",
    )


def test_kernel_tuners_file_helpers_move_to_autotune_and_the_rest_of_file_utils_stays() -> None:
    # Kernel Tuner's README example (vector_add.py) stores its results and its metadata.
    out = rewrite(
        "from kernel_tuner.file_utils import store_output_file, store_metadata_file\n"
        "from kernel_tuner.file_utils import get_t4_results, store_output_file"
    )
    assert out.text.split("\n") == [
        "from autotune import store_output_file, store_metadata_file",
        "from autotune import store_output_file",
        "from kernel_tuner.file_utils import get_t4_results",
    ]
    assert out.autotune_names == ("store_output_file", "store_metadata_file")
    assert out.kernel_tuner_left == ("kernel_tuner.file_utils.get_t4_results",)


def test_a_module_import_becomes_autotune_unless_more_of_kernel_tuner_is_used() -> None:
    alone = rewrite("import kernel_tuner\nr = kernel_tuner.tune_kernel('k', 's', 1, [], {})")
    assert alone.text == "import autotune\nr = autotune.tune_kernel('k', 's', 1, [], {})"
    assert alone.kernel_tuner_left == () and alone.changed == 2
    both = rewrite("import kernel_tuner\nkernel_tuner.util.x()\nkernel_tuner.run_kernel()")
    assert both.text.split("\n") == [
        "import kernel_tuner, autotune",
        "kernel_tuner.util.x()",
        "autotune.run_kernel()",
    ]
    assert both.kernel_tuner_left == ("kernel_tuner.util",)
    # Kernel Tuner's custom-strategy example: its strategy module is Kernel Tuner's; the module
    # named by a `from` import it also has (file_utils) is not a use of the module import.
    custom = rewrite(
        "import kernel_tuner\n"
        "from kernel_tuner import tune_kernel\n"
        "from kernel_tuner.file_utils import store_output_file\n"
        "tune_kernel('k', 's', 1, [], {}, strategy=kernel_tuner.strategies.minimize)"
    )
    assert custom.kernel_tuner_left == ("kernel_tuner.strategies",)


def _job(tmp_path: Path, answer, outputs_back: bool = True):
    x = np.arange(6, dtype=np.float32)
    arguments = [np.zeros(3, np.float32), x, np.int32(6)]
    data, digest = write_arguments(tmp_path, argument_arrays(arguments, answer, None))
    answered = tuple(i for i, a in enumerate(answer or ()) if a is not None)
    check = GivenCheck(data, digest, 3, answered, 1e-6, TimingPolicy(), outputs_back)
    plan = SimpleNamespace(defines=(("block_size_x", 128), ("tile", 2)), launches=())
    return SimpleNamespace(plan=plan, check=check)


def test_the_synthetic_session_answers_as_a_kernel_that_computed_the_answer(tmp_path) -> None:
    session = SyntheticSession()
    timed = session.evaluate(_job(tmp_path, None, outputs_back=False))
    assert timed.time_ms == pytest.approx(1.128)  # 1 ms + block_size_x / 1000
    back = session.evaluate(_job(tmp_path, [np.float32(15), None, None]))
    # What Kernel Tuner copies back: the answered array (here a sum), None for unanswered arrays,
    # scalars as given.
    assert back.outputs[0] == 15 and back.outputs[1] is None and back.outputs[2] == 6
    everything = session.evaluate(_job(tmp_path, None))
    np.testing.assert_array_equal(everything.outputs[1], np.arange(6, dtype=np.float32))


def test_the_command_needs_the_examples_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(kt_examples.ENV, raising=False)
    result = CliRunner().invoke(kt_examples.kt_examples, ["--synthetic"])
    assert result.exit_code != 0 and "AUTOTUNE_KT_EXAMPLES" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(kt_examples.kt_examples, ["--examples", str(tmp_path)])
    assert result.exit_code != 0 and "lacks accuracy.py" in result.output


def test_unknown_examples_are_refused(tmp_path) -> None:
    for e in kt_examples.classification():
        (tmp_path / e.name).write_text("")
    args = ["--examples", str(tmp_path), "--only", "nope.py"]
    result = CliRunner().invoke(kt_examples.kt_examples, args, env={**os.environ})
    assert result.exit_code != 0 and "nope.py" in result.output


def test_the_synthetic_session_makes_up_the_readings_asked_for() -> None:
    # Scripts whose metrics read observers' names (vector_add_observers.py) run through it.
    from autotune.gpu.synthetic import _readings
    from autotune.model.observe import ENERGY_J, POWER_W, TEMPERATURE_C, Observe

    assert _readings(None, 2.0) == {}
    found = dict(_readings(Observe(energy=True, temperature=True), 2.0)["observations"])
    assert found == {ENERGY_J: 0.6, TEMPERATURE_C: 50.0} and POWER_W not in found


def test_a_row_splits_ours_and_gives_each_script_s_whole_process() -> None:
    from autotune.bench.kt_examples import Example
    from autotune.bench.kt_table import row

    call = {"kernel": "k", "strategy": "brute_force", "evaluations": 15, "best_ms": 0.04}
    ours = {
        "status": "ran",
        "process_s": 3.712,
        "calls": [
            dict(call, wall_s=3.2, tuning_s=2.1, compile_s=0.9),
            dict(call, wall_s=1.0, tuning_s=0.8, compile_s=0.25),
        ],
    }
    theirs = {"status": "ran", "process_s": 5.71, "calls": [dict(call, wall_s=1.58)]}
    r = row(Example("vector_add.py", True), ours, theirs)
    assert (r["wall_s"], r["tuning_s"], r["compile_s"], r["script_s"]) == (4.2, 2.9, 1.15, 3.71)
    assert (r["kt_wall_s"], r["kt_script_s"]) == (1.58, 5.71)
    # Kernel Tuner's calls report no split: no column is made up for them.
    assert "kt_tuning_s" not in r and "kt_compile_s" not in r


def test_a_row_compares_each_call_s_best_and_the_wall_with_kernel_tuner_s(tmp_path) -> None:
    """best_vs_kt is the worst call's ratio (a second kernel's best may be the one that loses),
    wall_vs_kt the calls' summed wall; none where Kernel Tuner did not run; the table counts
    both against issue 33's targets."""
    from autotune.bench.kt_examples import Example
    from autotune.bench.kt_table import row, write_table

    def report(status, *calls):
        keys = ("best_ms", "wall_s")
        return {
            "status": status,
            "calls": [
                dict(zip(keys, c, strict=True), evaluations=9, strategy="brute_force")
                for c in calls
            ],
        }

    ours = report("ran", (0.5, 2.0), (0.0105, 1.0))
    r = row(Example("two.py", True), ours, report("ran", (0.6, 2.0), (0.01, 2.0)))
    assert (r["best_vs_kt"], r["wall_vs_kt"]) == (1.05, 0.75)
    late = row(Example("late.py", True), ours, report("timeout", (0.6, 150.0)))
    assert "best_vs_kt" not in late and "wall_vs_kt" not in late
    # Calls that do not pair up (Kernel Tuner stopped after the first) compare no best.
    short = row(Example("short.py", True), ours, report("ran", (0.6, 1.0)))
    assert "best_vs_kt" not in short and short["wall_vs_kt"] == 3.0
    write_table([r, late, short], [], tmp_path / "gpu", ["# t"])
    text = (tmp_path / "gpu.md").read_text()
    assert "best at most 1.05x on 1 of 1, wall at most 1x on 1 of 2." in text
    header = (tmp_path / "gpu.csv").read_text().splitlines()[0]
    assert "best_vs_kt,wall_vs_kt" in header


def test_a_package_of_the_script_s_own_that_is_missing_is_named_not_failed() -> None:
    from autotune.bench.kt_example_run import _missing_module

    assert _missing_module(ModuleNotFoundError("x", name="scipy.sparse")) == "scipy"
    # Either tool's own missing module is a failure to report, not a skip.
    assert _missing_module(ModuleNotFoundError("x", name="kernel_tuner.util")) is None
    assert _missing_module(ModuleNotFoundError("x", name="autotune.kt")) is None
    assert _missing_module(ImportError("x")) is None


def test_a_budget_on_a_brute_force_script_pins_the_same_configurations_for_both_tools() -> None:
    """Both tools brute-force the same seeded draw of the call's space (its restrictions and
    1,024 threads a block applied), so that two best times are of the same configurations."""
    from autotune.bench.kt_example_run import PIN_SEED, Calls, pinned_sample

    tune_params = {"block_size_x": [16, 32, 64, 128, 256, 512, 1024], "block_size_y": [1, 2, 4]}
    asked = []

    def fake_tune_kernel(name, source, size, args, params, *rest, **kw):
        asked.append((rest, kw))
        return [{"time": 1.0}], {}

    wrapped = Calls(max_fevals=5).wrap(fake_tune_kernel)
    wrapped("k", "s", 1, [], tune_params, restrictions=["block_size_x * block_size_y >= 64"])
    wrapped("k", "s", 1, [], tune_params, None, None, None, ["block_size_x >= 64"])
    wrapped("k", "s", 1, [], tune_params, strategy="random_sample")
    (_, first), (positional, second), (_, third) = asked
    pinned = first["restrictions"]
    assert first["strategy"] == "brute_force" and len(pinned.configurations) == 5
    # Every pinned configuration meets the script's restriction and the thread limit.
    for x, y in pinned.configurations:
        assert x * y >= 64 and x * y <= 1024
        assert pinned({"block_size_x": x, "block_size_y": y}) and pinned(x, y)  # both forms
    again = pinned_sample(tune_params, ["block_size_x * block_size_y >= 64"], None, 5, PIN_SEED)
    assert again.configurations == pinned.configurations  # the same draw every run
    assert {x for x, _ in positional[3].configurations} <= {64, 128, 256, 512, 1024}
    assert second["strategy"] == "brute_force" and "restrictions" not in second
    # A script's own strategy keeps its own draw, under the budget.
    assert third["strategy_options"] == {"max_fevals": 5} and "restrictions" not in third


def test_pinned_configurations_are_the_only_ones_autotune_tunes(tmp_path) -> None:
    from autotune.bench.kt_example_run import pinned_sample
    from autotune.kt.arguments import check_request
    from autotune.kt.space import bind_space
    from autotune.model.space import DeviceLimits

    tune_params = {"block_size_x": [32, 64, 128, 256], "unroll": [1, 2, 4, 8]}
    pinned = pinned_sample(tune_params, None, None, 6, 0)
    request = check_request(
        {"kernel_name": "k", "kernel_source": "", "problem_size": 1, "arguments": [],
         "tune_params": tune_params, "restrictions": pinned}
    )  # fmt: skip
    kept = {
        (c.as_dict()["block_size_x"], c.as_dict()["unroll"])
        for c in bind_space(request, DeviceLimits())
    }
    assert kept == pinned.configurations


@pytest.mark.parametrize("alone", [True, False])
def test_kernel_tuner_builds_the_pinned_configurations_alone(alone) -> None:
    """Kernel Tuner 1.5 reads a restriction's source (to turn lambdas into text) and calls it
    with the tunables' dict alone, or by position beside others: its space is the pinned one."""
    pytest.importorskip("kernel_tuner", reason="Kernel Tuner is not installed (extra: bench)")
    from kernel_tuner.searchspace import Searchspace

    from autotune.bench.kt_example_run import pinned_sample

    tune_params = {"block_size_x": [16, 64, 256, 1024], "block_size_y": [1, 2, 4], "tile": [1, 2]}
    pinned = pinned_sample(tune_params, ["block_size_x * tile <= 512"], None, 6, 0)
    space = Searchspace(tune_params, pinned if alone else [pinned], 1024)
    assert {tuple(c) for c in space.list} == pinned.configurations
