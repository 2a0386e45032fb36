"""Evaluate given tc_wgmma configurations in TF32 (NHWC) on given shapes into a results database:
the seeds of a short sweep, which `autotune run` on the same database then resumes from.

    python results/h100/tf32wg/seed.py STORAGE CONFIGS.csv... -- SHAPE...

CONFIGS.csv: `autotune best --format csv` tables; their tc_wgmma rows' configs are the seeds
(each one evaluated on every shape whose space holds it)."""

from __future__ import annotations

import csv
import dataclasses
import sys

from autotune.cli.campaign import RunRequest, open_campaign
from autotune.model.space import Config


def seeds(paths: list[str]) -> list[Config]:
    configs = []
    for path in paths:
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["family"] == "tc_wgmma"]
        configs += [Config.from_json(r["config"]) for r in rows]
    return list(dict.fromkeys(configs))


def main(argv: list[str]) -> None:
    if "--" not in argv or len(argv) < 4:
        sys.exit(__doc__.splitlines()[2].strip())
    cut = argv.index("--")
    storage, tables, shapes = argv[0], argv[1:cut], argv[cut + 1 :]
    given = seeds(tables)
    request = RunRequest(
        families=("tc_wgmma",),
        shapes=tuple(shapes),
        dtypes=("tf32",),
        layouts=("NHWC",),
        storage=storage,
        command="seed.py " + " ".join(argv),
    )
    campaign = open_campaign(request)
    try:
        studies = []
        for study in campaign.studies:
            configs = [study.family.complete(c) for c in given]
            valid = tuple(c for c in configs if study.space.is_valid(c))
            print(f"{study.label}: {len(valid)} of {len(given)} seeds valid", file=sys.stderr)
            studies.append(dataclasses.replace(study, configs=valid))
        outcome = campaign.tuner(request).run(studies, budget=None)
        for result in outcome.studies:
            best = result.best
            shown = f"{best[1].time_ms:.4f} ms {best[0]}" if best else "none"
            print(f"{result.study.label}: {result.evaluated} evaluated, best {shown}")
    finally:
        campaign.evaluator.close()


if __name__ == "__main__":
    main(sys.argv[1:])
