"""The synthetic GPU for the `run --ray` tests, in every process that would start a GPU worker.

use_synthetic_gpu() is Ray's worker_process_setup_hook in the tests' clusters: each worker
process Ray starts runs it, so an actor's `open_campaign` gets a SyntheticEvaluator. Run as a
module, this is `autotune` on the synthetic GPU all the way down (for `bench scaling --ray`):
its `--gpus` workers are this module again (`--worker`: the local transport's worker process),
and its `--ray local` instance counts the GPUs of CUDA_VISIBLE_DEVICES (fake ones) and installs
the hook.

usage: python -m tests.ray_synthetic AUTOTUNE-ARGUMENTS...
       python -m tests.ray_synthetic --worker   (a worker process of `run --gpus`)
With $AUTOTUNE_TEST_EVAL_LOG set, every evaluation is appended to that file as
"<pid>\\t<defines>" before the tuner records it (the format of tests/campaign_worker.py), so a
test sees which process evaluated what, and can kill one in the middle of a study."""

from __future__ import annotations

import os
import sys
import time

EVAL_LOG = "AUTOTUNE_TEST_EVAL_LOG"
EVAL_S = 0.05  # as campaign_worker: a kill lands mid-study, CI stays quick
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def use_synthetic_gpu() -> None:
    import autotune.gpu.evaluator
    from tests.campaign_worker import cost_ms
    from tests.conftest import SyntheticEvaluator

    log = os.environ.get(EVAL_LOG)

    def cost(defines: dict) -> float:
        time.sleep(EVAL_S)
        if log:
            with open(log, "a") as fh:
                fh.write(f"{os.getpid()}\t{sorted(defines.items())}\n")
                fh.flush()
        return cost_ms(defines)

    autotune.gpu.evaluator.GpuEvaluator = lambda index=0: SyntheticEvaluator(cost)


def ray_init_options(address: str | None) -> dict:
    """What the tests' Ray job needs: the hook above in every worker, and for a new local
    instance fake GPUs (those of CUDA_VISIBLE_DEVICES, else two) and two cores."""
    env = {"PYTHONPATH": ROOT}
    if os.environ.get(EVAL_LOG):
        env[EVAL_LOG] = os.environ[EVAL_LOG]
    options = {
        "runtime_env": {
            "env_vars": env,
            "worker_process_setup_hook": "tests.ray_synthetic.use_synthetic_gpu",
        },
    }
    if address == "local":  # a cluster joined brings its own resources
        visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
        options |= {"num_cpus": 2, "num_gpus": len(visible) or 2, "include_dashboard": False}
    return options


WORKER = [sys.executable, "-m", "tests.ray_synthetic", "--worker"]  # the local transport's


def main() -> None:
    import autotune.tuning.processes as processes
    import autotune.tuning.ray_transport as ray_transport
    from autotune.cli.app import entry
    from autotune.tuning import worker_process

    use_synthetic_gpu()
    if sys.argv[1:] == ["--worker"]:
        worker_process.main()
        return
    processes.WORKER_COMMAND = WORKER
    connect = ray_transport.connect
    ray_transport.connect = lambda address, **init: connect(
        address, **ray_init_options(address), **init
    )
    sys.argv = ["autotune", *sys.argv[1:]]
    entry()


if __name__ == "__main__":
    main()
