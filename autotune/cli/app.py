"""The `autotune` command: the group of cli.py with the commands of the other command modules.

The command modules import cli.py for its options and error handling; registering them here, not
at the bottom of cli.py, keeps the imports one way (no import circle)."""

from __future__ import annotations

from autotune.bench import bench
from autotune.cli.kt_cache import import_kt_cache
from autotune.cli.main import main
from autotune.cli.recording import export_recording
from autotune.cli.workers import status

main.add_command(bench)
main.add_command(export_recording)
main.add_command(import_kt_cache)
main.add_command(status)

__all__ = ["main"]
