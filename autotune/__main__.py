"""python -m autotune runs the command line."""

from autotune.app import main

if __name__ == "__main__":
    main()
