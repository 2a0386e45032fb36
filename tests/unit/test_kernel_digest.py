"""A changed kernel never shows an old measurement as current (DESIGN section 2, kernel
identity): a built-in family's copy and a kernel directory, tuned, edited, tuned again."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

import autotune.gpu.evaluator
from autotune.cli.app import main
from autotune.families import kernel_digests, with_directories
from autotune.families.direct_naive import DirectNaive
from autotune.families.files import INCLUDE_DIR, KERNEL_DIR, SPACE_DIR
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import Config, DeviceLimits
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.conftest import SyntheticEvaluator

PROBLEM = ConvProblem(N=29, K=5, C=7, F=9)


class NaiveCopy(DirectNaive):
    """direct_naive read from a temporary directory, to edit its kernel."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory


def _tune(family, compiler, evaluator, store) -> int:
    studies, _ = plan_studies([(family, PROBLEM)], DeviceLimits())
    tuner = Tuner(GpuRunner(compiler, evaluator), store, strategy="brute_force")
    return tuner.run(studies, 4).evaluated


def _copy_builtin(directory) -> None:
    shutil.copy(KERNEL_DIR / "direct_naive.cu", directory / "direct_naive.cu")
    shutil.copy(SPACE_DIR / "direct_naive.toml", directory / "direct_naive.toml")


def test_the_digest_covers_the_kernel_its_headers_reference_and_options(tmp_path) -> None:
    _copy_builtin(tmp_path)
    family = NaiveCopy(tmp_path)
    first = family.kernel_digest()
    assert first == DirectNaive().kernel_digest()  # the same code wherever it lies
    assert family.kernel_digest(("-std=c++17",)) != first  # other options
    (tmp_path / "tile.cuh").write_text("#define SOMETHING 1\n")
    source = tmp_path / "direct_naive.cu"
    source.write_text('#include "tile.cuh"\n' + source.read_text())
    with_header = family.kernel_digest()
    assert with_header != first
    (tmp_path / "tile.cuh").write_text("#define SOMETHING 2\n")
    assert family.kernel_digest() != with_header
    # A shared header of the built-in families counts, where the compiler finds it.
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "register_tile.cuh").write_text("// another\n")
    source.write_text('#include "register_tile.cuh"\n' + source.read_text())
    ours = family.kernel_digest(include_dirs=(INCLUDE_DIR,))
    assert family.kernel_digest(include_dirs=(tmp_path / "include",)) != ours


def test_an_edited_builtin_family_is_measured_again_and_its_old_rows_are_stale(
    tmp_path, compiler, synthetic_evaluator
) -> None:
    _copy_builtin(tmp_path)
    family = NaiveCopy(tmp_path)
    store = Store(str(tmp_path / "r.db"))
    assert _tune(family, compiler, synthetic_evaluator, store) == 4
    assert _tune(family, compiler, synthetic_evaluator, store) == 0  # resumed: all current
    old = family.kernel_digest()
    source = tmp_path / "direct_naive.cu"
    source.write_text(source.read_text() + "\n// edited\n")
    new = family.kernel_digest()
    assert new != old
    # Before it is measured again, the edited family has no best and its rows seed nothing.
    store.read_current({"direct_naive": new})
    assert store.best().empty
    assert store.history().empty
    assert store.evaluations(1, "direct_naive", PROBLEM) == []
    # A resume measures every configuration again; the old rows stay, stale.
    assert _tune(family, compiler, synthetic_evaluator, store) == 4
    best = store.best()
    assert list(best["kernel_digest"]) == [new] and list(best["evaluations"]) == [4]
    store.read_current({})
    assert len(store.history()) == 8
    assert store.best(kernels={"direct_naive": old})["evaluations"].tolist() == [4]


def test_an_edited_kernel_directory_family_is_measured_again(
    tmp_path, compiler, synthetic_evaluator
) -> None:
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(KERNEL_DIR / "direct_naive.cu", kernels / "mine.cu")
    (kernels / "mine.toml").write_text(
        'constraints = ["BLOCK_X * BLOCK_Y <= MAX_THREADS"]\n\n'
        "[parameters]\nBLOCK_X = [8, 16]\nBLOCK_Y = [1, 2]\nFILTER_IN_CONST = [0]\n\n"
        '[family]\nkind = "conv2d"\n\n[[family.launches]]\nentry = "direct_naive"\n'
        'grid = ["(N + BLOCK_X - 1) // BLOCK_X", "(N + BLOCK_Y - 1) // BLOCK_Y", "B * F"]\n'
        'block = ["BLOCK_X", "BLOCK_Y", "1"]\nargs = ["x", "w", "y"]\n'
    )
    family = with_directories([kernels])["mine"]
    store = Store(str(tmp_path / "r.db"))
    assert _tune(family, compiler, synthetic_evaluator, store) == 4
    assert _tune(family, compiler, synthetic_evaluator, store) == 0
    (kernels / "helper.cuh").write_text("// a helper\n")
    source = kernels / "mine.cu"
    source.write_text('#include "helper.cuh"\n' + source.read_text())
    edited = with_directories([kernels])["mine"]
    store.read_current(kernel_digests({"mine": edited}))
    assert store.best().empty
    assert _tune(edited, compiler, synthetic_evaluator, store) == 4
    assert store.best()["kernel_digest"].tolist() == [edited.kernel_digest()]


def test_backfill_gives_old_rows_their_familys_digest_once(tmp_path) -> None:
    store = Store(str(tmp_path / "r.db"))
    device = store.register_device(DeviceInfo(name="GPU", compute_capability="9.0", sm_count=1))
    run = store.start_run(device, "old", {})
    m = Measurement.from_samples([1.0, 1.1])
    a, b = Config.of({"BLOCK_X": 8}), Config.of({"BLOCK_X": 16})
    store.record(run, device, "direct_naive", PROBLEM, a, m, 1)  # before digests
    store.record(run, device, "direct_naive", PROBLEM, b, m, 1)
    store.record(run, device, "direct_naive", PROBLEM, b, m, 1, kernel_digest="d1")  # again
    store.read_current({"direct_naive": "d1"})
    assert store.best()["evaluations"].tolist() == [1]
    assert store.backfill_digests({"direct_naive": "d1"}) == 1  # b already has a d1 row
    assert store.best()["evaluations"].tolist() == [2]
    assert store.backfill_digests({"direct_naive": "d1"}) == 0


def test_a_runs_closing_table_shows_its_current_code_not_a_faster_old_row(
    tmp_path, monkeypatch
) -> None:
    # On the H200 (2026-12-03) `autotune run` closed with a configuration of tc_wgmma's text of
    # days before, measured once and faster, as its best; `autotune best` left it out.
    evaluator = SyntheticEvaluator(lambda defines: 1.0)
    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: evaluator)
    db = str(tmp_path / "r.db")
    (study,), _ = plan_studies([(DirectNaive(), PROBLEM)], DeviceLimits())
    with Store(db) as store:  # one row of older code, ten times faster than today's
        device = store.register_device(evaluator.device)
        run = store.start_run(device, "before", {})
        old = Measurement.from_samples([0.1] * 3)
        config = study.space.configs[0]
        store.record(run, device, "direct_naive", PROBLEM, config, old, 1, kernel_digest="0" * 16)
    args = ["run", "--family", "direct_naive", "--shape", "N=29,K=5,C=7,F=9", "--budget", "2"]
    args += ["--no-baseline", "--storage", db, "--cache-dir", str(tmp_path / "cubins")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if line.startswith("| direct_naive")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert "1.0" in cells and "0.1" not in cells
