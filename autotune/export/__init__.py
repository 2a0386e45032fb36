"""Exports of the store: a self-contained C++/CUDA tree of the tuned plans, and T4 JSON files."""

from __future__ import annotations

from autotune.export.plans import Excluded, ExportedPlan, ExportError, Selection, select
from autotune.export.tree import write_tree

__all__ = ["ExportError", "Excluded", "ExportedPlan", "Selection", "select", "write_tree"]
