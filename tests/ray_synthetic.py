"""The synthetic GPU in every process of a local Ray cluster, for the `run --ray` tests: Ray runs
use_synthetic_gpu() in each worker process it starts (its worker_process_setup_hook), so the
actors' `open_campaign` starts a SyntheticEvaluator instead of the GPU worker.

Every evaluation is appended to the file $AUTOTUNE_TEST_EVAL_LOG as "<pid>\\t<defines>" before
the tuner records it (the format of tests/campaign_worker.py), so a test sees which actor
process evaluated what, and can kill one in the middle of a study."""

from __future__ import annotations

import os
import time

EVAL_LOG = "AUTOTUNE_TEST_EVAL_LOG"
EVAL_S = 0.05  # as campaign_worker: a kill lands mid-study, CI stays quick


def use_synthetic_gpu() -> None:
    import autotune.gpu.evaluator
    from tests.campaign_worker import cost_ms
    from tests.conftest import SyntheticEvaluator

    log = os.environ[EVAL_LOG]

    def cost(defines: dict) -> float:
        time.sleep(EVAL_S)
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\t{sorted(defines.items())}\n")
            fh.flush()
        return cost_ms(defines)

    autotune.gpu.evaluator.GpuEvaluator = lambda index=0: SyntheticEvaluator(cost)
