"""python -m autotune and the `autotune` script: the command line."""

from __future__ import annotations

import os
import signal


def exit_quietly_until_loaded() -> None:
    """Until the commands are loaded (a second or more of imports) a stop signal has nothing to
    clean up: end at once, with the shell's code and without an import's traceback."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda received, _frame: os._exit(128 + received))


def main() -> None:
    exit_quietly_until_loaded()
    from autotune.cli.app import entry  # installs the handlers of a loaded process

    entry()


if __name__ == "__main__":
    main()
