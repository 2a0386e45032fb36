"""The `autotune` command: the group of cli.py with the commands of the other command modules.

The command modules import cli.py for its options and error handling; registering them here, not
at the bottom of cli.py, keeps the imports one way (no import circle)."""

from __future__ import annotations

from autotune.bench import bench
from autotune.cli import main
from autotune.kt_cache_cli import import_kt_cache
from autotune.recording_cli import export_recording
from autotune.workers_cli import status

main.add_command(bench)
main.add_command(export_recording)
main.add_command(import_kt_cache)
main.add_command(status)

__all__ = ["main"]
