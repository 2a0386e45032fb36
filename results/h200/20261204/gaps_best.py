"""Session 70's sample_gaps.py (both sides under PyTorch's profiler, CUPTI) with ours the tool's
own pick, as the tables take it (session 75's both_sides_best.py: the store's best of the
current code) rather than the fastest single evaluation.

    python3 gaps_best.py STORE TRACE.csv --dtype bf16 --shape N=14,K=1,C=1024,F=256,B=32 \
        [--shape ...] [--repeats 5] > sides.md
    python3 ../20261202b/sample_runs.py TRACE.csv sides.md > runs.md
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "20261202"))
sys.path.insert(0, str(HERE.parent / "20261202b"))
sys.path.insert(0, str(HERE.parent / "20261202e"))
import both_sides  # noqa: E402  (session 69's, as sample_gaps.py imports it)
import sample_gaps  # noqa: E402
from both_sides_best import store_best  # noqa: E402

if __name__ == "__main__":
    both_sides.best_config = store_best
    sample_gaps.main()
