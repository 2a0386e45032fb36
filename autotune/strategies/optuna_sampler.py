"""Optuna's samplers (TPE, GP, CMA-ES) as strategies over the valid configs of a bound space."""

from __future__ import annotations

import importlib.util
import math
import random
import warnings
from typing import TYPE_CHECKING

from autotune.model.space import BoundSpace, Config, Value
from autotune.strategies.base import StrategyUnavailable

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution
    from optuna.trial import Trial

# Sampler proposals per ask, at most, before falling back to a random unseen valid config:
# samplers that converge keep proposing the best config, and a tight space rejects most of the
# Cartesian product the sampler sees.
MAX_ATTEMPTS = 50


def _optuna():
    """Optuna, imported when one of its samplers is made: its import takes about 0.2 s, which
    a run or a tune_kernel call with another strategy need not pay."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class OptunaStrategy:
    """One in-memory Optuna study driven through ask/tell, minimising log(time_ms).

    Numeric parameters are an integer index into their sorted values, so a sampler sees their
    order and powers of two become evenly spaced; booleans and strings are categories. Every
    proposal the strategy rejects (invalid, already seen) is told back to Optuna, so the study
    holds exactly what the sampler produced.
    """

    def __init__(
        self, name: str, space: BoundSpace, sampler: optuna.samplers.BaseSampler, seed: int | None
    ) -> None:
        optuna = _optuna()
        from optuna.distributions import CategoricalDistribution, IntDistribution

        self.name = name
        self._configs = space.configs
        self._unseen = set(self._configs)  # valid, neither asked nor told
        self._choices: dict[str, tuple[Value, ...]] = {}
        self._distributions: dict[str, BaseDistribution] = {}
        self._indexed: set[str] = set()
        for p in space.space.parameters:
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in p.values):
                self._indexed.add(p.name)
                self._choices[p.name] = tuple(sorted(p.values))
                self._distributions[p.name] = IntDistribution(0, len(p.values) - 1)
            else:
                self._choices[p.name] = p.values
                self._distributions[p.name] = CategoricalDistribution(p.values)
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._rng = random.Random(seed)
        self._attempts = MAX_ATTEMPTS
        self._pending: dict[Config, Trial] = {}
        self._told: dict[Config, float | None] = {}  # objective, None for a failure

    def ask(self) -> Config | None:
        if not self._unseen:
            return None
        for _ in range(self._attempts):
            trial = self._study.ask(self._distributions)
            config = self._decode(trial.params)
            if config in self._unseen:
                self._attempts = min(MAX_ATTEMPTS, 2 * self._attempts)
                return self._hand_out(config, trial)
            # A config told before gives its known value; an invalid one, a failed one or one
            # still in flight has none to give.
            value = self._told.get(config)
            if value is None:
                self._study.tell(trial, state=_optuna().trial.TrialState.FAIL)
            else:
                self._study.tell(trial, value)
        # A sampler that ran dry once mostly stays dry (it has converged, or few configs are
        # left): try it less next time, rather than spend MAX_ATTEMPTS proposals on every ask.
        self._attempts = max(1, self._attempts // 2)
        config = self._rng.choice([c for c in self._configs if c in self._unseen])
        self._study.enqueue_trial(self._encode(config))  # type: ignore[arg-type]
        return self._hand_out(config, self._study.ask(self._distributions))

    def tell(self, config: Config, time_ms: float | None) -> None:
        # A time log() cannot take is a broken measurement, not a fast kernel.
        value = math.log(time_ms) if time_ms is not None and 0 < time_ms < math.inf else None
        self._unseen.discard(config)
        self._told[config] = value
        from optuna.trial import TrialState, create_trial

        state = TrialState.FAIL if value is None else TrialState.COMPLETE
        trial = self._pending.pop(config, None)
        if trial is not None:
            self._study.tell(trial, value, state=state)
            return
        params = self._encode(config)
        if params is None:
            return  # history from another version of the space: nothing Optuna can represent
        self._study.add_trial(
            create_trial(params=params, distributions=self._distributions, value=value, state=state)
        )

    def _hand_out(self, config: Config, trial: Trial) -> Config:
        self._unseen.discard(config)
        self._pending[config] = trial
        return config

    def _decode(self, params: dict[str, Value]) -> Config:
        return Config.of(
            {
                name: choices[params[name]] if name in self._indexed else params[name]  # type: ignore[index]
                for name, choices in self._choices.items()
            }
        )

    def _encode(self, config: Config) -> dict[str, Value] | None:
        values = config.as_dict()
        if set(values) != set(self._choices):
            return None
        if any(values[name] not in choices for name, choices in self._choices.items()):
            return None
        return {
            name: choices.index(values[name]) if name in self._indexed else values[name]
            for name, choices in self._choices.items()
        }


def _require(strategy: str, *modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise StrategyUnavailable(
            f"strategy {strategy!r} needs {' and '.join(missing)}, which is not installed"
            f" (pip install {' '.join(missing)})"
        )


def tpe(space: BoundSpace, seed: int | None = None) -> OptunaStrategy:
    sampler = _optuna().samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
    return OptunaStrategy("tpe", space, sampler, seed)


def gp(space: BoundSpace, seed: int | None = None) -> OptunaStrategy:
    _require("gp", "torch", "scipy")
    # Parameters with a single value are sampled independently; that is expected, not news.
    sampler = _optuna().samplers.GPSampler(seed=seed, warn_independent_sampling=False)
    return OptunaStrategy("gp", space, sampler, seed)


def cmaes(space: BoundSpace, seed: int | None = None) -> OptunaStrategy:
    _require("cmaes", "cmaes")
    # The margin keeps CMA-ES from collapsing onto one value of an integer (index) parameter;
    # Optuna marks it experimental, which is no news to a user at every run.
    optuna = _optuna()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.CmaEsSampler(
            seed=seed, with_margin=True, warn_independent_sampling=False
        )
    return OptunaStrategy("cmaes", space, sampler, seed)
