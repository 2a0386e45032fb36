"""Model-based search: a Gaussian process over the configs' coordinates, fitted to log time, picks
the config of largest expected improvement among the unvisited ones of the explicit list. Each
parameter has its own kernel length, fitted by marginal likelihood."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

import numpy as np

from autotune.model.space import BoundSpace, Config
from autotune.strategies.local import Coordinates, LocalSearch

# The constants were chosen on replays of Kernel Tuner's published spaces and ours (`autotune
# bench search`; results/bench/search_published.md); at 50 evaluations the published spaces moved
# by less than 0.01 of the optimum over N_INIT 4-10, NOISE 1e-3 to 1e-1, POOL 2048 or 8192,
# NEIGHBOURS_OF 5 or 20. Taking every 2nd or 3rd ask from local search instead cost 0.01.
# Per-parameter lengths, log2 coordinates and the cap on slow times together raised the mean at 50
# from 0.915 to 0.928 (30 seeds); none of the three alone raised it (10 seeds), and neither a
# neighbour radius of 2, a power-of-two-alignment feature nor 4 or 10 random starts did better.
# Random configs before the model takes over.
N_INIT = 6
# After this many results the search goes on as local search (told every result so far): the
# model has found the basins by then, the walk around them is cheaper (the fit's cost grows with
# the cube of the results) and does as well.
HAND_OVER = 50
# Candidates per ask: this many random unvisited configs, plus every unvisited config one step
# from one of the NEIGHBOURS_OF best results (where expected improvement is usually largest).
POOL = 2048
NEIGHBOURS_OF = 5
# The model sees at most this many results, the fastest first: the fit costs the cube of it, and
# what is far slower than the best says little about where the best lies.
MAX_TRAIN = 200
# Squared-exponential kernel on the coordinates scaled to [0, 1] per parameter (a category: one
# column per value); one length for all is refitted by marginal likelihood over this grid every
# REFIT results, then, from ARD_MIN results on, each parameter's in turn over ARD_LENGTHS
# (ARD_PASSES sweeps; the longest all but drops a parameter). Fitted on the random start alone,
# per-parameter lengths cost 0.018 of the optimum at 10 evaluations on our H100 spaces. Shorter
# lengths fit the jump between failures and their fast neighbours and then leave the GP blind
# between results: on a smooth bowl with failures, 0.15 stalled a
# search for 50 evaluations at the 24th best config.
LENGTHS = (0.25, 0.4, 0.65, 1.0)
REFIT = 10
ARD_MIN = 10
ARD_LENGTHS = (0.25, 0.4, 0.65, 1.0, 1.6, 4.0)
ARD_PASSES = 2
NOISE = 1e-2  # of the standardised log time's variance
FAILURE_PENALTY = 0.5  # a failed config counts as this much slower (log time) than the slowest
# Log times more than this many times the best's distance from the median above the median
# count as that: the fit then spends its lengths on the fast region, not on the slowest configs.
SLOW_CAP = 1.0
# Matern 5/2 ("matern") or squared-exponential ("se") kernel. Matern's rougher functions fit
# tile-size cliffs better: +0.007 of the optimum at 50 on the published spaces (seeds 0-19).
KERNEL = "matern"
# The random start, after its first config: each next one the farthest (in the features) from
# those already seen among INIT_POOL random unvisited configs ("maximin"), or uniform
# ("random"). Spread, the first model sees the whole space: on the published spaces (4,092 to
# 17,956 configs) +0.034 at 10 and +0.018 at 20 (seeds 100-129; 0.000 at 50). Only in spaces
# of at least SPREAD_MIN configs: on our H100 spaces (105 to 486) it cost 0.003 at 20 and 50
# (implicit_gemm C=64 lost 0.04 at 50: its corners are poor), where 6 random configs already
# cover the space.
INIT_DESIGN = "maximin"
INIT_POOL = 64
SPREAD_MIN = 1000
# Expected improvement over the best minus XI (standardised log time): a little less greed,
# +0.010 at 50 (seeds 0-19), most of it on the convolution_milo spaces.
XI = 0.1
# A trust region, in a cold search (no start_from, no prior): after the random start, the
# candidates are the unvisited configs that differ from the best result in at most `radius`
# parameters. The radius starts at REGION_START of the parameters that take several values,
# doubles after a new best, halves after REGION_PATIENCE results in a row without one, and
# opens to the whole space when it would fall below 1 (the next halvings close it again). On the
# published spaces +0.017 +- 0.004 of the optimum at 50 on seeds 100-129, +0.002 +- 0.005 on
# the benchmark's seeds 0-19, nothing lost at 10 and 20; most of it on the convolution_milo
# spaces, whose runs otherwise end one parameter away from the optimum. Halving after 2 or 5,
# starting at a quarter, a radius in steps of one parameter's values, and moving the region to
# another basin did no better (results/bench/search_variants/variants.py). A warm search's seeds
# already sit in the basin.
REGION_START = 0.5
REGION_PATIENCE = 3
# With a prior (another GPU's ranking of the configs, use_prior): the model's mean is the prior
# scaled by least squares (ridge PRIOR_RIDGE on the slope, never negative), the GP fits what is
# left; the PRIOR_TOP unvisited configs the prior ranks best join every ask's candidates.
PRIOR_TOP = 64
PRIOR_RIDGE = 1.0
# A parameter no result varies ties the likelihood at every length; the tie's length (the
# shortest, or whatever rounding favours) reads its untried values as the results' mean, so
# expected improvement never reaches them: a kernel's later tunables, held at one value by a
# study's stored results and its seeds, went unsearched. Those named by new_parameters keep the
# longest length while constant (an untried value reads as its tried twin); every constant
# parameter so treated cost the warm default 0.007-0.008 on Kernel Tuner's spaces at 50-100
# evaluations (results/h200/20261203c/README.md, section 5).


class SurrogateSearch:
    """Bayesian optimisation over an explicit list of valid configs.

    The first N_INIT asks are random and spread out (or the configs given to start_from). After
    that each ask fits a Gaussian process to log time over the results so far (a failure counts
    as slower than the slowest; one kernel length per parameter; with use_prior, around another
    GPU's ranking) and returns the candidate of largest expected improvement: candidates are a
    random sample of the unvisited configs and the unvisited neighbours of the best ones; in a
    cold search, only those of them within a trust region around the best result (REGION_START).
    After HAND_OVER results, local search (told every result) goes on from the best found.
    """

    name = "surrogate"

    def __init__(self, space: BoundSpace, seed: int | None = None) -> None:
        self._coords = Coordinates(space)
        self._x, self._groups = features(self._coords)
        self._lengths = np.full(len(self._groups), LENGTHS[len(LENGTHS) // 2])
        self._rng = random.Random(seed)
        n = len(self._coords.configs)
        self._visited = np.zeros(n, dtype=bool)  # asked or told
        self._told: list[int] = []
        self._told_set: set[int] = set()
        self._y: list[float] = []  # log time, nan for a failure
        self._start: list[int] = []
        self._random_left = N_INIT
        self._since_fit = REFIT
        self._space, self._seed = space, seed
        self._local: LocalSearch | None = None  # built at the hand-over, told everything
        self._history: list[tuple[Config, float | None]] = []
        self._prior: np.ndarray | None = None
        self._warm = False  # started from given configs or given a prior: no trust region
        self._region_full = sum(len(values) > 1 for values in self._coords.positions)
        self._radius = max(1, round(REGION_START * self._region_full))
        self._stalled = 0  # results in a row since the last new best
        self._best_y = math.inf
        self._new: list[int] = []  # groups named by new_parameters

    def new_parameters(self, names: Iterable[str]) -> None:
        """Parameters new to the kernel: the longest length while no result varies them."""
        wanted, coords = set(names), self._coords
        varied = [n for n, p in zip(coords.names, coords.positions, strict=True) if len(p) > 1]
        if len(varied) != len(self._groups):
            return  # a space of one config: nothing to search
        self._new = [g for g, n in enumerate(varied) if n in wanted]

    def use_prior(self, prior: np.ndarray) -> None:
        """A score per config of the space (lower: expected faster; NaN: unknown) that the
        model takes as its mean, scaled by least squares on the results."""
        p = np.asarray(prior, dtype=float).copy()
        known = ~np.isnan(p)
        if not known.any():
            return
        p[~known] = p[known].mean()
        self._prior = (p - p.mean()) / (p.std() + 1e-12)
        self._warm = True

    def start_from(self, configs: Iterable[Config]) -> None:
        """Ask these (the nearest valid config each) first, in place of the random start."""
        for config in configs:
            near = self._coords.nearest(config, ~self._visited)
            if near is not None:
                i = self._coords.index[near]
                if i not in self._start:
                    self._start.append(i)
        self._random_left = 0
        self._warm = True

    def ask(self) -> Config | None:
        while self._start:
            i = self._start.pop(0)
            if not self._visited[i]:
                return self._take(i)
        if self._visited.all():
            return None
        if len(self._told) >= HAND_OVER:
            if self._local is None:
                self._local = LocalSearch(self._space, self._seed, self._coords)
                for config, time_ms in self._history:
                    self._local.tell(config, time_ms)
            # Local search may propose a config asked here and still in flight: skip it.
            while (config := self._local.ask()) is not None:
                i = self._coords.index[config]
                if not self._visited[i]:
                    return self._take(i)
            return None
        ok = sum(1 for y in self._y if not math.isnan(y))
        if self._random_left > 0 or ok < 2:
            self._random_left = max(0, self._random_left - 1)
            if INIT_DESIGN == "maximin" and self._told and len(self._x) >= SPREAD_MIN:
                return self._take(self._spread())
            return self._take(self._random())
        return self._take(self._best_candidate())

    def tell(self, config: Config, time_ms: float | None) -> None:
        i = self._coords.index.get(config)
        if i is None or i in self._told_set:
            return  # history from another version of the space, or told twice
        self._visited[i] = True
        if self._local is None:
            self._history.append((config, time_ms))
        else:
            self._local.tell(config, time_ms)
        ok = time_ms is not None and 0 < time_ms < math.inf
        self._told.append(i)
        self._told_set.add(i)
        self._y.append(math.log(time_ms) if ok else math.nan)
        self._since_fit += 1
        self._move_region(math.log(time_ms) if ok else math.nan)

    def _move_region(self, y: float) -> None:
        """The trust region's radius after one more result (the random start moves nothing)."""
        better = y < self._best_y  # False for a failure (nan)
        if better:
            self._best_y = y
        if len(self._told) <= N_INIT:
            return
        if better:
            self._radius, self._stalled = min(2 * self._radius, self._region_full), 0
            return
        self._stalled += 1
        if self._stalled >= REGION_PATIENCE:
            self._stalled = 0
            half = self._radius // 2
            self._radius = half if half >= 1 else self._region_full

    def _take(self, i: int) -> Config:
        self._visited[i] = True
        return self._coords.configs[i]

    def _spread(self) -> int:
        """Of INIT_POOL random unvisited configs, the one farthest from every visited one."""
        free = np.flatnonzero(~self._visited)
        pool = free[[self._rng.randrange(len(free)) for _ in range(INIT_POOL)]]
        seen = np.flatnonzero(self._visited)
        d = _sqdist(self._x[pool], self._x[seen]).min(axis=1)
        return int(pool[int(np.argmax(d))])

    def _random(self) -> int:
        free = np.flatnonzero(~self._visited)
        return int(free[self._rng.randrange(len(free))])

    def _candidates(self, order: np.ndarray) -> np.ndarray:
        free = np.flatnonzero(~self._visited)
        if len(free) > POOL:
            free = free[sorted(self._rng.sample(range(len(free)), POOL))]
        near = [free]
        if self._prior is not None and PRIOR_TOP:
            rest = np.flatnonzero(~self._visited)
            near.append(rest[np.argsort(self._prior[rest], kind="stable")[:PRIOR_TOP]])
        for i in order[:NEIGHBOURS_OF]:
            d = self._coords.distances(self._coords.rows[i])
            near.append(np.flatnonzero((d == 1) & ~self._visited))
        candidates = np.unique(np.concatenate(near))
        if self._warm or self._radius >= self._region_full or not len(order):
            return candidates
        rows = self._coords.rows
        differ = (rows != rows[order[0]]).sum(axis=1)  # parameters unlike the best result's
        inside = np.flatnonzero((differ <= self._radius) & ~self._visited)
        if len(inside) > POOL:  # as many as the global ask weighs: those it drew
            inside = candidates[differ[candidates] <= self._radius]
        return inside if len(inside) else candidates

    def _best_candidate(self) -> int:
        told = np.array(self._told)
        y = np.array(self._y)
        failed = np.isnan(y)
        y[failed] = y[~failed].max() + FAILURE_PENALTY
        order = np.argsort(y, kind="stable")
        keep = order[:MAX_TRAIN]
        candidates = self._candidates(told[order[~failed[order]]])
        x, yk = self._x[told[keep]], y[keep]
        median = np.median(yk)
        yk = np.minimum(yk, median + SLOW_CAP * (median - yk.min()))
        yk = (yk - yk.mean()) / (yk.std() + 1e-12)
        best_y = yk.min()
        base_t = base_c = 0.0
        s_scale = 1.0
        if self._prior is not None:
            p = self._prior[told[keep]]
            pc = p - p.mean()
            b = max(0.0, float(pc @ (yk - yk.mean())) / (float(pc @ pc) + PRIOR_RIDGE))
            a = yk.mean() - b * p.mean()
            base_t = a + b * p
            base_c = a + b * self._prior[candidates]
            resid = yk - base_t
            s_scale = resid.std() + 1e-12
            yk = resid / s_scale
        if self._since_fit >= REFIT:
            self._fit(x, yk)
            self._since_fit = 0
        scale = self._column_lengths()
        xs = x / scale
        chol = _cholesky(_kern(_sqdist(xs, xs)))
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, yk))
        k = _kern(_sqdist(self._x[candidates] / scale, xs))
        mu = k @ alpha
        v = np.linalg.solve(chol, k.T)
        sd = np.sqrt(np.maximum(1.0 - (v * v).sum(axis=0), 1e-12))
        mu, sd = base_c + s_scale * mu, s_scale * sd
        ei = expected_improvement(mu, sd, best_y - XI)
        top = np.flatnonzero(ei >= ei.max() - 1e-12)
        return int(candidates[top[self._rng.randrange(len(top))]])

    def _column_lengths(self) -> np.ndarray:
        """Each feature column's kernel length: its parameter's."""
        out = np.ones(self._x.shape[1])
        for g, cols in enumerate(self._groups):
            out[cols] = self._lengths[g]
        return out

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        """Kernel lengths of largest marginal likelihood: one for all over LENGTHS, then each
        parameter's over ARD_LENGTHS with the others held, ARD_PASSES times (from ARD_MIN
        results on)."""
        d2 = _sqdist(x, x)
        self._lengths[:] = max(LENGTHS, key=lambda length: _likelihood(d2 / length**2, y))
        if len(y) < ARD_MIN:
            return

        def likelihood(g: int, length: float) -> float:
            self._lengths[g] = length
            xs = x / self._column_lengths()
            return _likelihood(_sqdist(xs, xs), y)

        for _ in range(ARD_PASSES):
            for g in range(len(self._groups)):
                self._lengths[g] = max(ARD_LENGTHS, key=lambda length: likelihood(g, length))
        for g in self._new:
            if np.ptp(x[:, self._groups[g]], axis=0).max() == 0:
                self._lengths[g] = ARD_LENGTHS[-1]


def features(coords: Coordinates) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each config as a point in [0, 1] per numeric parameter (log2 of its value where all values
    are positive, else its position in the sorted values) and one column per value of a
    categorical one (1/sqrt 2, so that a change costs 1); and each parameter's columns."""
    cols: list[np.ndarray] = []
    groups = []
    for j, positions in enumerate(coords.positions):
        k = len(positions)
        if k < 2:
            continue
        r = coords.rows[:, j]
        start = len(cols)
        if coords.categorical[j]:
            cols += [(r == v) / math.sqrt(2) for v in range(k)]
        elif all(v > 0 for v in positions):
            logs = np.log2(np.array(sorted(positions), dtype=float))
            cols.append((logs[r] - logs[0]) / (logs[-1] - logs[0]))
        else:
            cols.append(r / (k - 1.0))
        groups.append(np.arange(start, len(cols)))
    if not cols:
        return np.zeros((len(coords.configs), 1)), [np.array([0])]
    return np.stack(cols, axis=1), groups


def _kern(d2: np.ndarray) -> np.ndarray:
    """The kernel (KERNEL) at squared scaled distances d2."""
    if KERNEL == "matern":
        r = np.sqrt(5.0 * d2)
        return (1.0 + r + r * r / 3.0) * np.exp(-r)
    return np.exp(-0.5 * d2)


def _sqdist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
    return np.maximum(d, 0.0)


def _cholesky(k: np.ndarray) -> np.ndarray:
    """Cholesky factor of k plus the noise, with more jitter if rounding makes it indefinite."""
    eye = np.eye(len(k))
    for jitter in (NOISE, 1e-1, 1.0):
        try:
            return np.linalg.cholesky(k + jitter * eye)
        except np.linalg.LinAlgError:
            continue
    return np.linalg.cholesky(k + 10.0 * eye)


def _likelihood(d2: np.ndarray, y: np.ndarray) -> float:
    """Log marginal likelihood (up to a constant) of y under the kernel at d2."""
    chol = _cholesky(_kern(d2))
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
    return float(-0.5 * y @ alpha - np.log(np.diag(chol)).sum())


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """E[max(best - f, 0)] for f ~ N(mu, sd^2) (minimising)."""
    z = (best - mu) / sd
    return (best - mu) * _normal_cdf(z) + sd * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    # Abramowitz and Stegun 7.1.26 for erf (absolute error below 1.5e-7); NumPy has no erf.
    x = np.abs(z) / math.sqrt(2)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = np.zeros_like(t)
    for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly = (poly + a) * t
    erf = 1.0 - poly * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * erf)
