"""Each layer's fastest stored configurations of the current tc_wgmma code, measured again with
each L2_HINT (which operands' copies carry an evict-last L2 policy), the same tiles otherwise:
stored as a run like any other (checked, timed under protocol 2, the study's best confirmed),
so that the tables' bests and `kind_vs_rest.py --kind L2_HINT=...` read them. Written for call
3's tables and not run: the tunable did not land (it needs l2_hint.diff applied).

    python3 hint_sweep.py STORE --dtype fp16 --top 2 --hint 1 --hint 3 \
        --shape N=7,K=1,C=2048,F=512,B=32 [--shape ...] [--time-limit S]
"""

from __future__ import annotations

import argparse
import sys

from autotune.cli.progress import ProgressPrinter
from autotune.families import get_family, kernel_digests
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import Study, plan_studies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--top", type=int, default=2)
    ap.add_argument("--hint", type=int, action="append", required=True)
    ap.add_argument("--time-limit", type=float)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    session = open_gpu_session(args.store)
    try:
        limits, device = session.runner.evaluator.limits, session.runner.evaluator.device.name
        best = session.store.best(
            device=device, family=family.name, top=args.top, kernels=kernel_digests()
        )
        studies = []
        for shape in args.shape:
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
            rows = best[best["problem_key"] == problem.key]
            if not len(rows):
                print(f"hint_sweep: {problem.key}: nothing of this code stored", file=sys.stderr)
                continue
            (study,), _ = plan_studies([(family, problem)], limits)
            tops = [family.complete(Config.from_json(c)).as_dict() for c in rows["config"]]
            hinted = dict.fromkeys(Config.of(c | {"L2_HINT": h}) for c in tops for h in args.hint)
            valid = tuple(c for c in hinted if study.space.is_valid(c))
            studies.append(Study(study.family, problem, study.space, configs=valid))
        tuner = session.tuner(
            "hint_sweep.py " + " ".join(sys.argv[2:]),
            timing=TimingPolicy(),
            on_progress=ProgressPrinter(),
        )
        outcome = tuner.run(studies, None, args.time_limit)
        print(f"hint_sweep: {outcome.evaluated} configurations in {outcome.elapsed_s:.0f} s")
    finally:
        session.close()


if __name__ == "__main__":
    main()
