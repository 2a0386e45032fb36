"""A new results database that could not be created is refused before the GPU worker starts
(issue 38: `run --storage` under a file printed "starting the GPU worker" first), and the check
itself creates nothing."""

from __future__ import annotations

import pytest

import autotune.gpu.evaluator as evaluator_module
from autotune.store.engine import StoreError, check_creatable
from autotune.tuning.session import open_gpu_session


def test_a_path_under_a_regular_file_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(StoreError, match="notes.txt is not a directory"):
        check_creatable(tmp_path / "notes.txt" / "sub" / "results.db")


def test_a_path_under_missing_directories_is_accepted_and_nothing_is_made(tmp_path):
    check_creatable(tmp_path / "a" / "b" / "results.db")
    assert list(tmp_path.iterdir()) == []


def test_the_gpu_worker_is_not_started_for_a_database_that_cannot_be_created(tmp_path, monkeypatch):
    started, said = [], []
    monkeypatch.setattr(evaluator_module, "GpuEvaluator", lambda gpu: started.append(gpu))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(StoreError, match="cannot create results database"):
        open_gpu_session(str(tmp_path / "notes.txt" / "results.db"), say=said.append)
    assert started == [] and said == []
    assert (tmp_path / "notes.txt").read_text() == "x"
