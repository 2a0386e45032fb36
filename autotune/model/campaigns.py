"""Named campaigns: which families `autotune run` tunes on which shapes, kept as data."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from autotune import package_path
from autotune.model.parsing import parse_shape
from autotune.model.problem import Problem, ProblemError
from autotune.model.shapes import read_toml

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass

CAMPAIGNS_FILE = package_path("autotune", "data", "campaigns.toml")
QUICK = "quick"  # what a bare `autotune run` does
FULL = "full"  # every family on its own shape set: code, not data (families bring their sets)
DEFAULT_BUDGET = 12  # evaluations per study of a run that names no budget


@dataclass(frozen=True, slots=True)
class CampaignSpec:
    """A named campaign: (family name, problem) pairs, in the order the file lists them."""

    name: str
    description: str
    pairs: tuple[tuple[str, Problem], ...]

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(family for family, _ in self.pairs))


def _load() -> dict[str, dict]:
    return read_toml(CAMPAIGNS_FILE, "campaigns")


def campaign_names() -> list[str]:
    """Every campaign `--campaign` takes: those in the file, then `full`."""
    return [*_load(), FULL]


def named_campaign(name: str) -> CampaignSpec:
    """The campaign of that name from the file (`full` has no entry: the caller builds it)."""
    specs = _load()
    if name not in specs:
        known = ", ".join(campaign_names())
        raise ProblemError(f"unknown campaign {name!r} (known: {known})")
    spec = specs[name]
    pairs = []
    for index, study in enumerate(spec.get("studies", [])):
        where = f"{CAMPAIGNS_FILE.name}: {name}.studies[{index}]"
        family = study.get("family")
        if not isinstance(family, str):
            raise ProblemError(f"{where}: needs a family name")
        for text in study.get("shapes", []):
            try:
                pairs.append((family, parse_shape(text)))
            except ProblemError as err:
                raise ProblemError(f"{where}: {err}") from None
    return CampaignSpec(name, spec.get("description", ""), tuple(pairs))


__all__ = ["DEFAULT_BUDGET", "FULL", "QUICK", "CampaignSpec", "campaign_names", "named_campaign"]
