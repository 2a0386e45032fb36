"""Issue 25, 2026-11-27: variants of the default strategy (`surrogate`) replayed on recorded spaces.

A research script, not part of the package: each variant changes one thing in
autotune/strategies/surrogate.py (a constant, the features, the output transform, the acquisition,
the candidates or the model) by patching the module in the worker processes, then replays the
same spaces, seeds and scoring as `autotune bench search` (fraction of the optimum after 10, 20
and 50 evaluations, averaged per space over the seeds, then over the spaces).

    python results/bench/search_variants/variants.py baseline refit1 --seeds 0:10
    python results/bench/search_variants/variants.py refit1 --seeds 100:130 --save r1.json
    python results/bench/search_variants/variants.py --paired base.json r1.json
    python results/bench/search_variants/variants.py baseline --trace A6000 --seeds 0:10

The further variants (hand_over_*, trust_region*, final_sweep_*, flag_mean) install a subclass of
the strategy as S.SurrogateSearch (one change each; the functions above the table say which).

Since 2026-11-27 the default has `trust_region`'s region (surrogate.py, REGION_START), so
`baseline` is the default with it and `no_region` the default before, on which every other
variant's figures in results/README.md were made; replayed now, their patches apply on top of the
region (and the trust_region* variants add a second one).

The third round (few_*, additive, linear_trend, region_*, flag_sweep*, length_prior*, xi_*,
noise_1e3; figures in README.md beside this file) patches the default with its region. `--budgets
10,20,50,100` scores at other budgets (past HAND_OVER the default goes on as local search).
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import sys
import time
from collections import Counter
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import autotune.strategies.surrogate as S  # noqa: E402
from autotune.bench.search import load_cases  # noqa: E402

BUDGETS = (10, 20, 50)
_features = S.features
_candidates = S.SurrogateSearch._candidates
_best_candidate = S.SurrogateSearch._best_candidate


# -- features ---------------------------------------------------------------------------------


def _single_columns(coords):
    x, groups = _features(coords)
    return x, groups, [x[:, g[0]] for g in groups if len(g) == 1]


def _with(x, groups, extra):
    if not extra:
        return x, groups
    m = x.shape[1]
    new = [np.array([m + i]) for i in range(len(extra))]
    return np.concatenate([x, np.stack(extra, 1)], 1), list(groups) + new


def pair_features(coords):
    """Every pair of numeric parameters' mean coordinate (in log2: their product) as a feature."""
    x, groups, cols = _single_columns(coords)
    extra = [(a + b) / 2 for i, a in enumerate(cols) for b in cols[i + 1 :]]
    return _with(x, groups, extra)


def onehot_columns(coords, j):
    r = coords.rows[:, j]
    return [(r == v) / math.sqrt(2) for v in range(len(coords.positions[j]))]


def allcat_features(coords):
    """Every parameter one-hot (a Hamming-distance kernel)."""
    cols, groups = [], []
    for j, positions in enumerate(coords.positions):
        if len(positions) < 2:
            continue
        start = len(cols)
        cols += onehot_columns(coords, j)
        groups.append(np.arange(start, len(cols)))
    return np.stack(cols, axis=1), groups


def both_features(coords):
    """The default's coordinates plus a one-hot group for each numeric parameter of 3+ values."""
    x, groups = _features(coords)
    cols, groups = [x[:, i] for i in range(x.shape[1])], list(groups)
    for j, positions in enumerate(coords.positions):
        if len(positions) < 3 or coords.categorical[j]:
            continue
        start = len(cols)
        cols += onehot_columns(coords, j)
        groups.append(np.arange(start, len(cols)))
    return np.stack(cols, axis=1), groups


def _values(coords, name):
    j = coords.names.index(name)
    by_position = sorted(coords.positions[j], key=coords.positions[j].get)
    return np.array(by_position, dtype=float)[coords.rows[:, j]]


def _unit(v):
    lo, hi = v.min(), v.max()
    return (v - lo) / (hi - lo) if hi > lo else None


def derived_features(coords, threads: bool, align: bool):
    """Threads a block (log2 of the block_size_* product, Kernel Tuner's names) and/or each
    integer parameter's power-of-two alignment (trailing zero bits, at most 5)."""
    x, groups = _features(coords)
    extra = []
    blocks = [n for n in ("block_size_x", "block_size_y", "block_size_z") if n in coords.names]
    if threads and len(blocks) >= 2:
        f = _unit(sum(np.log2(np.maximum(_values(coords, n), 1)) for n in blocks))
        extra += [f] if f is not None else []
    if align:
        for j, name in enumerate(coords.names):
            values = list(coords.positions[j])
            ints = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)
            if coords.categorical[j] or len(values) < 5 or not ints:
                continue
            v = [int(a) for a in _values(coords, name)]
            f = _unit(np.array([min((a & -a).bit_length() - 1, 5) for a in v], dtype=float))
            extra += [f] if f is not None else []
    return _with(x, groups, extra)


# -- the model's ask --------------------------------------------------------------------------

OPTIONS = {"ytrans": "cap", "acq": "ei", "exploit_every": 0, "exploit_top": 1, "model": "gp"}


def _normal_scores(y):
    from statistics import NormalDist

    ranks = np.argsort(np.argsort(y, kind="stable"), kind="stable")
    return np.array([NormalDist().inv_cdf((r + 0.5) / len(y)) for r in ranks])


def _targets(self):
    told = np.array(self._told)
    y = np.array(self._y)
    failed = np.isnan(y)
    y[failed] = y[~failed].max() + S.FAILURE_PENALTY
    order = np.argsort(y, kind="stable")
    return told, y, failed, order


def _training(self):
    """What the default's model ask starts from: the told indices, the kept (fastest
    MAX_TRAIN) positions among them, the ok results' indices fastest first, the candidates,
    the training rows and their transformed targets; the kernel refitted when it is due."""
    told, y, failed, order = _targets(self)
    keep = order[: S.MAX_TRAIN]
    ok_order = told[order[~failed[order]]]
    candidates = self._candidates(ok_order)
    x, yk = self._x[told[keep]], _transformed(y[keep])
    if self._since_fit >= S.REFIT:
        self._fit(x, yk)
        self._since_fit = 0
    return told, keep, ok_order, candidates, x, yk


def _transformed(yk):
    if OPTIONS["ytrans"] == "rank":
        yk = _normal_scores(yk)
    else:
        median = np.median(yk)
        yk = np.minimum(yk, median + S.SLOW_CAP * (median - yk.min()))
        if OPTIONS["ytrans"] == "logcap":  # log of the distance above the best
            yk = np.log(yk - yk.min() + 0.05 * (np.median(yk) - yk.min() + 1e-9))
    return (yk - yk.mean()) / (yk.std() + 1e-12)


def _pick(self, candidates, score):
    top = np.flatnonzero(score >= score.max() - 1e-12)
    return int(candidates[top[self._rng.randrange(len(top))]])


def gp_ask(self):
    """The default's ask without the prior, with OPTIONS' output transform and acquisition."""
    told, keep, _, candidates, x, yk = _training(self)
    scale = self._column_lengths()
    xs = x / scale
    chol = S._cholesky(S._kern(S._sqdist(xs, xs)))
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, yk))
    k = S._kern(S._sqdist(self._x[candidates] / scale, xs))
    mu = k @ alpha
    v = np.linalg.solve(chol, k.T)
    sd = np.sqrt(np.maximum(1.0 - (v * v).sum(axis=0), 1e-12))
    if OPTIONS["acq"] == "ts":  # independent draws per candidate (no joint sample)
        draws = np.array([self._rng.gauss(0.0, 1.0) for _ in range(len(mu))])
        return _pick(self, candidates, -(mu + sd * draws))
    return _pick(self, candidates, S.expected_improvement(mu, sd, yk.min() - S.XI))


def forest_ask(self):
    """Expected improvement under a bootstrapped extra-trees forest (SMAC's mean and variance)."""
    told, y, failed, order = _targets(self)
    candidates = self._candidates(told[order[~failed[order]]])
    yk = _transformed(y)
    rng = np.random.default_rng(self._rng.randrange(2**31))
    mu, sd = forest(self._x[told], yk, self._x[candidates], rng)
    return _pick(self, candidates, S.expected_improvement(mu, sd, yk.min() - S.XI))


def ask(self):
    every = OPTIONS.get("alternate", 0)
    if OPTIONS["model"] == "forest" or (every and len(self._told) % every == 0):
        return forest_ask(self)
    return gp_ask(self)


def exploiting_candidates(self, order):
    """Every exploit_every-th ask: only the unvisited neighbours of the exploit_top best."""
    every = OPTIONS["exploit_every"]
    if every and len(self._told) % every == 0:
        near = []
        for i in order[: OPTIONS["exploit_top"]]:
            d = self._coords.distances(self._coords.rows[i])
            near.append(np.flatnonzero((d == 1) & ~self._visited))
        near = np.unique(np.concatenate(near))
        if len(near):
            return near
    return _candidates(self, order)


# -- a small extra-trees forest ---------------------------------------------------------------


def _tree(x, y, rng, min_leaf=2):
    feature, threshold, left, right, value, variance = [], [], [], [], [], []

    def node() -> int:
        for a, v in ((feature, -1), (threshold, 0.0), (left, -1), (right, -1)):
            a.append(v)
        value.append(0.0)
        variance.append(0.0)
        return len(feature) - 1

    stack = [(node(), np.arange(len(x)))]
    while stack:
        at, idx = stack.pop()
        yy = y[idx]
        value[at], variance[at] = yy.mean(), yy.var()
        if len(idx) < 2 * min_leaf or yy.var() < 1e-12:
            continue
        best = None
        for f in rng.permutation(x.shape[1]):
            col = x[idx, f]
            if col.max() - col.min() < 1e-12:
                continue
            t = rng.uniform(col.min(), col.max())
            m = col <= t
            n_left = int(m.sum())
            if min(n_left, len(idx) - n_left) < min_leaf:
                continue
            sse = yy[m].var() * n_left + yy[~m].var() * (len(idx) - n_left)
            if best is None or sse < best[0]:
                best = (sse, f, t, m)
        if best is None:
            continue
        _, feature[at], threshold[at], m = best
        left[at], right[at] = node(), node()
        stack += [(left[at], idx[m]), (right[at], idx[~m])]
    return tuple(np.array(a) for a in (feature, threshold, left, right, value, variance))


def _leaves(tree, x):
    feature, threshold, left, right, value, variance = tree
    at = np.zeros(len(x), dtype=int)
    while (inner := np.flatnonzero(feature[at] >= 0)).size:
        f = feature[at[inner]]
        goes_left = x[inner, f] <= threshold[at[inner]]
        at[inner] = np.where(goes_left, left[at[inner]], right[at[inner]])
    return value[at], variance[at]


def forest(x, y, xc, rng, trees=40):
    means, variances = [], []
    for _ in range(trees):
        b = rng.integers(0, len(x), len(x))
        m, v = _leaves(_tree(x[b], y[b], rng), xc)
        means.append(m)
        variances.append(v)
    means, variances = np.array(means), np.array(variances)
    return means.mean(0), np.sqrt(means.var(0) + variances.mean(0) + 1e-9)


# -- issue 25, further variants: subclasses of the strategy (installed as S.SurrogateSearch) -----


def _default_scores(self):
    """The default's model ask (no prior) up to the acquisition: candidates, EI, the told
    indices of the ok results fastest first; the same RNG draws as the default."""
    told, keep, ok_order, candidates, x, yk = _training(self)
    scale = self._column_lengths()
    xs = x / scale
    gram = S._kern(S._sqdist(xs, xs)) + self._extra_gram(told[keep], told[keep])
    chol = S._cholesky(gram)
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, yk))
    k = S._kern(S._sqdist(self._x[candidates] / scale, xs))
    k = k + self._extra_gram(candidates, told[keep])
    mu = k @ alpha
    v = np.linalg.solve(chol, k.T)
    sd = np.sqrt(np.maximum(1.0 + self._extra_var() - (v * v).sum(axis=0), 1e-12))
    return candidates, S.expected_improvement(mu, sd, yk.min() - S.XI), ok_order


class NoRegion(S.SurrogateSearch):
    """The default without its trust region (the default before 2026-11-27)."""

    def __init__(self, space, seed=None):
        super().__init__(space, seed)
        self._warm = True  # the region is a cold search's only


class Variant(S.SurrogateSearch):
    """The default with its model ask split at _default_scores (a kernel term may be added)."""

    def _extra_gram(self, a, b):
        return 0.0

    def _extra_var(self):
        return 0.0

    def _best_candidate(self):
        candidates, ei, _ = _default_scores(self)
        return _pick(self, candidates, ei)


def trust_region(start=0.5, patience=3, metric="hamming", after=0, base=None, recentre=False):
    """TuRBO-like, discrete: after the random start, candidates are only the unvisited configs
    within a radius of the best (parameters that differ, or steps on any one parameter's sorted
    values for metric "box"); it starts at `start` of the (multi-valued) parameters (of the
    longest value list for "box"), halves after `patience` results in a row without a new best,
    doubles after one; below 1 it restarts global (every candidate of the default). With
    `after`, the region starts only once that many results are in (the default's asks before).
    With `recentre`, a region that would fall below 1 moves instead (at its starting radius) to
    the best result more than that radius from its centre (a second basin; global if none), and
    a new best of its own (not only a new best overall) moves its centre and doubles it."""

    class TrustRegion(base or Variant):
        def __init__(self, space, seed=None):
            super().__init__(space, seed)
            sizes = [len(p) for p in self._coords.positions]
            self._full = sum(n > 1 for n in sizes) if metric == "hamming" else max(sizes) - 1
            self._r = self._r0 = max(1, round(start * self._full))
            self._fails, self._best_y = 0, math.inf
            self._centre, self._centre_y = None, math.inf

        def tell(self, config, time_ms):
            n = len(self._told)
            super().tell(config, time_ms)
            if len(self._told) == n:
                return
            y = self._y[-1]
            better = not math.isnan(y) and y < self._best_y
            self._best_y = y if better else self._best_y
            if n < max(S.N_INIT, after):  # the random start (or the asks before) moves nothing
                return
            if recentre:
                return self._recentre_tell(y)
            if better:
                self._r, self._fails = min(2 * self._r, self._full), 0
                return
            self._fails += 1
            if self._fails >= patience:
                self._fails = 0
                self._r = self._r // 2 if self._r // 2 >= 1 else self._full

        def _recentre_tell(self, y):
            if self._centre is None:  # the first model result: the best before it
                prev = [
                    (v, i) for i, v in zip(self._told[:-1], self._y[:-1], strict=True) if v == v
                ]
                self._centre_y, self._centre = min(prev) if prev else (math.inf, None)
            if not math.isnan(y) and y < self._centre_y:
                self._centre, self._centre_y = self._told[-1], y
                self._r, self._fails = min(2 * self._r, self._full), 0
                return
            self._fails += 1
            if self._fails < patience:
                return
            self._fails = 0
            if self._r // 2 >= 1:
                self._r //= 2
                return
            rows = self._coords.rows
            told = np.array(self._told)
            y_all = np.array(self._y)
            d = (rows[told] != rows[self._centre]).sum(axis=1)
            far = np.flatnonzero((d > self._r0) & ~np.isnan(y_all))
            if len(far):
                k = far[np.argmin(y_all[far])]
                self._centre, self._centre_y, self._r = int(told[k]), float(y_all[k]), self._r0
            else:
                k = int(np.nanargmin(y_all))
                self._centre, self._centre_y, self._r = int(told[k]), float(y_all[k]), self._full

        def _candidates(self, order):
            base = _candidates(self, order)
            if recentre and self._centre is not None:
                order = np.array([self._centre])
            if self._r >= self._full or not len(order) or len(self._told) < after:
                return base
            rows = self._coords.rows
            diff = np.abs(rows - rows[order[0]])
            if metric == "hamming":
                d = (diff > 0).sum(axis=1)
            else:
                d = np.where(self._coords.categorical, np.minimum(diff, 1), diff).max(axis=1)
            near = np.flatnonzero((d <= self._r) & ~self._visited)
            if len(near) > S.POOL:
                near = base[d[base] <= self._r]
            return near if len(near) else base

    return TrustRegion


def final_sweep(threshold, base=None):
    """When the largest EI among the candidates is below `threshold` (standardised log time),
    the ask is the unvisited one-step neighbour of the best of largest EI instead."""

    class FinalSweep(base or Variant):
        def _best_candidate(self):
            candidates, ei, order = _default_scores(self)
            if ei.max() < threshold and len(order):
                d = self._coords.distances(self._coords.rows[order[0]])[candidates]
                step = np.flatnonzero(d == 1)
                if len(step):
                    return _pick(self, candidates[step], ei[step])
            return _pick(self, candidates, ei)

    return FinalSweep


EI_LOG: list = []


class LogEI(Variant):
    """The default, recording (results so far, largest EI) per model ask in EI_LOG."""

    def _best_candidate(self):
        candidates, ei, _ = _default_scores(self)
        EI_LOG.append((len(self._told), float(ei.max())))
        return _pick(self, candidates, ei)


def flag_mean(weights=(0.0, 0.1, 0.3, 1.0)):
    """A separate mean per combination of the two-valued parameters: the kernel plus w where two
    configs share every flag (a random offset per combination of variance w; w of largest
    marginal likelihood among `weights` at each refit, the lengths held)."""

    class FlagMean(Variant):
        def __init__(self, space, seed=None):
            super().__init__(space, seed)
            flags = [j for j, p in enumerate(self._coords.positions) if len(p) == 2]
            rows = self._coords.rows[:, flags]
            self._combo = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
            self._w = 0.0 if not flags else weights[-1]

        def _extra_gram(self, a, b):
            return self._w * (self._combo[a][:, None] == self._combo[b][None, :])

        def _extra_var(self):
            return self._w

        def _fit(self, x, y):
            super()._fit(x, y)
            told = np.array(self._told)
            t = np.array(self._y)  # the rows that x holds: _targets' keep
            t[np.isnan(t)] = np.nanmax(t) + S.FAILURE_PENALTY
            keep = told[np.argsort(t, kind="stable")[: S.MAX_TRAIN]]
            xs = x / self._column_lengths()
            base = S._kern(S._sqdist(xs, xs))
            same = self._combo[keep][:, None] == self._combo[keep][None, :]

            def likelihood(w):
                chol = S._cholesky(base + w * same)
                alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
                return float(-0.5 * y @ alpha - np.log(np.diag(chol)).sum())

            self._w = max(weights, key=likelihood) if len(set(self._combo)) > 1 else 0.0

    return FlagMean


# -- issue 25, third round (2026-11-27): what the milo spaces' tile sizes and flags ask for -----


def _few_values(coords, j, most):
    """A numeric parameter of 3 to `most` values that are not all powers of two (a method
    number 0..3, a tile size 1..4): a step between values says nothing about the next step."""
    values = list(coords.positions[j])
    if coords.categorical[j] or not 3 <= len(values) <= most:
        return False
    return not all(isinstance(v, int) and v > 0 and v & (v - 1) == 0 for v in values)


def few_values_features(coords, most=4, keep_numeric=False):
    """The default's features, but such a parameter one-hot (as a category), or with
    `keep_numeric` both: its coordinate and a one-hot group, each with its own length."""
    x, groups = _features(coords)
    multi = [j for j, p in enumerate(coords.positions) if len(p) > 1]
    cols, out = [], []
    for g, j in zip(groups, multi, strict=True):
        few = _few_values(coords, j, most)
        if not few or keep_numeric:
            out.append(np.arange(len(cols), len(cols) + len(g)))
            cols += [x[:, c] for c in g]
        if few:
            out.append(np.arange(len(cols), len(cols) + len(coords.positions[j])))
            cols += onehot_columns(coords, j)
    return np.stack(cols, axis=1), out


class Gram(Variant):
    """The default with its kernel replaced by _gram (of feature rows) and a weight _w of its
    extra term chosen by marginal likelihood among WEIGHTS at each refit (lengths as the
    default fits them)."""

    WEIGHTS: tuple = (0.0,)
    _w = 0.0

    def _gram(self, a, b):
        scale = self._column_lengths()
        return S._kern(S._sqdist(a / scale, b / scale))

    def _prior_var(self, a):
        return np.ones(len(a))

    def _fit(self, x, y):
        super()._fit(x, y)

        def likelihood(w):
            self._w = w
            chol = S._cholesky(self._gram(x, x))
            alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
            return float(-0.5 * y @ alpha - np.log(np.diag(chol)).sum())

        self._w = max(self.WEIGHTS, key=likelihood)

    def _best_candidate(self):
        told, keep, _, candidates, x, yk = _training(self)
        chol = S._cholesky(self._gram(x, x))
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, yk))
        xc = self._x[candidates]
        k = self._gram(xc, x)
        v = np.linalg.solve(chol, k.T)
        sd = np.sqrt(np.maximum(self._prior_var(xc) - (v * v).sum(axis=0), 1e-12))
        ei = S.expected_improvement(k @ alpha, sd, yk.min() - S.XI)
        return _pick(self, candidates, ei)


def additive(weights=(0.0, 0.25, 0.5)):
    """The kernel (1 - w) * the default's product over all parameters + w * the mean of one
    kernel per parameter (an additive part that generalises a parameter's effect from the
    results in other corners)."""

    class Additive(Gram):
        WEIGHTS = weights

        def _gram(self, a, b):
            k = super()._gram(a, b)
            if self._w == 0.0:
                return k
            scale = self._column_lengths()
            xa, xb = a / scale, b / scale
            parts = [S._kern(S._sqdist(xa[:, g], xb[:, g])) for g in self._groups]
            return (1 - self._w) * k + self._w * np.mean(parts, axis=0)

    return Additive


def linear_trend(weights=(0.0, 0.1, 0.3, 1.0)):
    """The default's kernel plus w * a linear one (x - 1/2) . (x' - 1/2) / d over the features:
    Bayesian linear regression under the GP, so that a trend (larger tiles faster) carries on
    to the edges of the space, where the zero-mean GP falls back to the mean."""

    class LinearTrend(Gram):
        WEIGHTS = weights

        def _gram(self, a, b):
            k = super()._gram(a, b)
            return k + self._w * (a - 0.5) @ (b - 0.5).T / a.shape[1]

        def _prior_var(self, a):
            return 1.0 + self._w * ((a - 0.5) ** 2).sum(axis=1) / a.shape[1]

    return LinearTrend


def flag_sweep(most_flips=3):
    """When the trust region halves (REGION_PATIENCE results without a new best), the best
    result not swept yet is asked with every other combination of the two-valued parameters
    (at most `most_flips` of them changed, fewest first), the others kept: the corner whose
    random configs are poorest may hold the optimum along the same tiles (the milo spaces'
    no-shared-memory corner), and the model, having seen its poor ones, rarely asks there."""

    class FlagSweep(Variant):
        def __init__(self, space, seed=None):
            super().__init__(space, seed)
            self._flags = [j for j, p in enumerate(self._coords.positions) if len(p) == 2]
            self._swept: set[int] = set()
            self._queue: list[int] = []

        def tell(self, config, time_ms):
            radius = self._radius
            super().tell(config, time_ms)
            if self._radius < radius and not self._warm and self._flags:
                self._sweep()

        def _sweep(self):
            ok = [(y, i) for i, y in zip(self._told, self._y, strict=True) if y == y]
            if not ok:
                return
            best = min(ok)[1]
            if best in self._swept:
                return
            self._swept.add(best)
            rows = self._coords.rows
            others = [j for j in range(rows.shape[1]) if j not in self._flags]
            same = (rows[:, others] == rows[best, others]).all(axis=1) & ~self._visited
            flips = (rows[:, self._flags] != rows[best, self._flags]).sum(axis=1)
            found = np.flatnonzero(same & (flips <= most_flips))
            self._queue += found[np.argsort(flips[found], kind="stable")].tolist()

        def ask(self):
            while self._queue and len(self._told) < S.HAND_OVER:
                i = self._queue.pop(0)
                if not self._visited[i]:
                    return self._take(i)
            return super().ask()

    return FlagSweep


def length_prior(centre=0.65, spread=1.0):
    """The kernel lengths fitted by maximum a posteriori, not likelihood alone: a log-normal
    prior on each (median `centre`, sd `spread` in log length) steadies the fit, whose lengths
    on the milo spaces jump between 0.25 and 4 from one refit to the next (20-50 results, seven
    parameters), as BoTorch's priors on lengths do."""

    def penalty(lengths):
        return 0.5 * float((np.log(np.asarray(lengths) / centre) ** 2).sum()) / spread**2

    class LengthPrior(Variant):
        def _fit(self, x, y):
            d2 = S._sqdist(x, x)
            n = len(self._groups)

            def one(length):
                return S._likelihood(d2 / length**2, y) - penalty([length] * n)

            self._lengths[:] = max(S.LENGTHS, key=one)
            if len(y) < S.ARD_MIN:
                return

            def likelihood(g, length):
                self._lengths[g] = length
                xs = x / self._column_lengths()
                return S._likelihood(S._sqdist(xs, xs), y) - penalty(self._lengths)

            for _ in range(S.ARD_PASSES):
                for g in range(n):
                    self._lengths[g] = max(S.ARD_LENGTHS, key=lambda v: likelihood(g, v))

    return LengthPrior


# -- variants ---------------------------------------------------------------------------------

VARIANTS: dict[str, dict] = {
    "baseline": {},
    "no_region": {"SurrogateSearch": NoRegion},  # the default before it took the trust region
    "pool_all": {"POOL": 10**9},
    "pair_features": {"features": pair_features},
    "allcat_features": {"features": allcat_features},
    "numeric_and_onehot": {"features": both_features},
    "threads_feature": {"features": lambda c: derived_features(c, True, False)},
    "align_feature": {"features": lambda c: derived_features(c, False, True)},
    "threads_align": {"features": lambda c: derived_features(c, True, True)},
    "rank_output": {"options": {"ytrans": "rank"}},
    "logcap_output": {"options": {"ytrans": "logcap"}},
    "thompson": {"options": {"acq": "ts"}},
    "exploit_every_3": {"options": {"exploit_every": 3}},
    "exploit_every_2": {"options": {"exploit_every": 2}},
    "exploit_every_3_top_3": {"options": {"exploit_every": 3, "exploit_top": 3}},
    "refit1": {"REFIT": 1},
    "refit3": {"REFIT": 3},
    "refit3_wide_ard": {"REFIT": 3, "ARD_LENGTHS": (0.15, 0.25, 0.4, 0.65, 1.0, 1.6, 2.5, 4, 10)},
    "refit1_rank": {"REFIT": 1, "options": {"ytrans": "rank"}},
    "forest": {"options": {"model": "forest"}},
    "gp_forest_alternate": {"options": {"alternate": 2}},
    # issue 25, further variants (each one change; see the functions above)
    "variant_copy": {"SurrogateSearch": Variant},  # the default through _default_scores: a check
    "log_ei": {"SurrogateSearch": LogEI},  # the default, logging each ask's largest EI
    "hand_over_30": {"HAND_OVER": 30},  # local search from the 30th result on (not the 50th)
    "hand_over_35": {"HAND_OVER": 35},  # ... from the 35th
    "hand_over_40": {"HAND_OVER": 40},  # ... from the 40th
    "trust_region": {"SurrogateSearch": trust_region()},  # EI within a Hamming radius of the best
    "trust_region_patience_5": {"SurrogateSearch": trust_region(patience=5)},  # halves after 5
    "trust_region_from_20": {"SurrogateSearch": trust_region(after=20)},  # default's asks before
    "trust_region_box": {"SurrogateSearch": trust_region(metric="box")},  # per-parameter steps
    "final_sweep_001": {"SurrogateSearch": final_sweep(0.01)},  # EI < 0.01: best's neighbours
    "final_sweep_0003": {"SurrogateSearch": final_sweep(0.003)},  # ... below 0.003
    "final_sweep_003": {"SurrogateSearch": final_sweep(0.03)},  # ... below 0.03
    "trust_region_start_025": {"SurrogateSearch": trust_region(start=0.25)},  # from 1/4 of them
    "trust_region_patience_2": {"SurrogateSearch": trust_region(patience=2)},  # halves after 2
    "trust_region_recentre": {"SurrogateSearch": trust_region(recentre=True)},  # next basin
    "trust_region_sweep_003": {"SurrogateSearch": final_sweep(0.03, trust_region())},  # both
    "flag_mean": {"SurrogateSearch": flag_mean()},  # a mean per combination of the flags
    # issue 25, third round (see the functions above the table)
    "few_cat": {"features": few_values_features},  # 3-4 values, not powers of two: one-hot
    "few_both": {"features": lambda c: few_values_features(c, keep_numeric=True)},  # and numeric
    "additive": {"SurrogateSearch": additive()},  # product kernel plus per-parameter kernels
    "linear_trend": {"SurrogateSearch": linear_trend()},  # plus a linear kernel (a trend)
    "region_025": {"REGION_START": 0.25},  # the default's region from a quarter of them
    "region_075": {"REGION_START": 0.75},  # ... from three quarters
    "region_patience_4": {"REGION_PATIENCE": 4},  # halved after 4 results without a new best
    "flag_sweep": {"SurrogateSearch": flag_sweep()},  # a stalled best in every flag corner
    "flag_sweep_1": {"SurrogateSearch": flag_sweep(1)},  # ... one flag changed at a time
    "length_prior": {"SurrogateSearch": length_prior()},  # MAP lengths, log-normal prior
    "length_prior_tight": {"SurrogateSearch": length_prior(spread=0.5)},  # ... a tighter one
    "xi_0": {"XI": 0.0},  # plain expected improvement
    "xi_03": {"XI": 0.3},  # less greed
    "noise_1e3": {"NOISE": 1e-3},  # a sharper fit of narrow peaks
}

_CASES: list = []


def install(name: str) -> None:
    """Patch the surrogate module (in this process) as the variant says."""
    patch = dict(VARIANTS[name])
    options = patch.pop("options", None)
    if options is not None:
        OPTIONS.update(options)
        S.SurrogateSearch._best_candidate = ask
        S.SurrogateSearch._candidates = exploiting_candidates
    for key, value in patch.items():
        setattr(S, key, value)


def replay(task):
    name, case_index, seed, budget = task
    install(name)
    return case_index, seed, trajectory(_CASES[case_index], seed, budget)


def trajectory(case, seed: int, budget: int) -> list[float]:
    """The installed search's fraction of the optimum after each of `budget` evaluations (a
    search that ends sooner keeps its last figure)."""
    strategy = S.SurrogateSearch(case.space, seed)
    best, fractions = math.inf, []
    for _ in range(budget):
        config = strategy.ask()
        if config is None:
            break
        strategy.tell(config, case.times[config])
        if case.ok[config] is not None:
            best = min(best, case.ok[config])
        fractions.append(case.optimum_ms / best if math.isfinite(best) else 0.0)
    return fractions + fractions[-1:] * (budget - len(fractions))


def trace(name: str, case, seeds: range) -> None:
    """Per seed: the best config found in BUDGETS[-1] evaluations, when, and how the evaluations
    fell over the values of the parameters with at most two values (flags)."""
    install(name)
    coords = S.Coordinates(case.space)
    flags = [n for n, p in zip(coords.names, coords.positions, strict=True) if len(p) == 2]
    for seed in seeds:
        strategy = S.SurrogateSearch(case.space, seed)
        best, found, where = math.inf, None, Counter()
        for i in range(max(BUDGETS)):
            config = strategy.ask()
            strategy.tell(config, case.times[config])
            where[tuple(config[n] for n in flags)] += 1
            if case.ok[config] is not None and case.ok[config] < best:
                best, found = case.ok[config], (config, i + 1)
        values = [found[0][n] for n in coords.names]
        click.echo(
            f"seed {seed}: {case.optimum_ms / best:.3f} at evaluation {found[1]}, {values}; "
            f"evaluations by {tuple(flags)}: {dict(sorted(where.items()))}"
        )


def paired(base_path: str, other_path: str) -> None:
    """Mean over the seeds of (other - base), each seed's fractions averaged over the spaces."""
    base, other = json.loads(Path(base_path).read_text()), json.loads(Path(other_path).read_text())
    for b in BUDGETS:
        a = np.array([[t[b - 1] for t in base[k]] for k in sorted(base, key=int)])
        o = np.array([[t[b - 1] for t in other[k]] for k in sorted(base, key=int)])
        d = (o - a).mean(0)
        click.echo(f"at {b}: {d.mean():+.4f} +- {d.std(ddof=1) / math.sqrt(len(d)):.4f}")


def best_of(paths) -> None:
    """Per space the best mean among saved runs (a choice made after seeing them: no variant),
    averaged over the spaces: how far picking among the variants could go on those seeds."""
    saved = [json.loads(Path(p).read_text()) for p in paths]
    for b in BUDGETS:
        per = [
            [np.mean([t[b - 1] for t in runs[k]]) for k in sorted(runs, key=int)] for runs in saved
        ]
        click.echo(f"at {b}: {np.max(per, axis=0).mean():.3f} (best of {len(saved)} per space)")


@click.command()
@click.argument("names", nargs=-1)
@click.option("--seeds", default="0:10", show_default=True, help="first:last (exclusive)")
@click.option("--recordings", default=str(ROOT / "results/recordings/kernel_tuner"))
@click.option("--jobs", default=2, show_default=True)
@click.option("--save", default=None, help="Write each space's trajectories (one variant).")
@click.option("--paired", "pair", nargs=2, default=None, help="Compare two --save files.")
@click.option("--trace", "space", default=None, help="One space (a part of its name): per seed.")
@click.option("--budgets", default=",".join(map(str, BUDGETS)), show_default=True)
@click.option("--best-of", "best", is_flag=True, help="NAMES are --save files: best per space.")
def main(names, seeds, recordings, jobs, save, pair, space, budgets, best):
    global _CASES, BUDGETS
    BUDGETS = tuple(int(b) for b in budgets.split(","))
    if best:
        best_of(names)
        return
    if pair:
        paired(*pair)
        return
    _CASES, _ = load_cases([recordings])
    first, last = (int(s) for s in seeds.split(":"))
    if space:
        (case,) = [c for c in _CASES if space in c.name]
        trace(names[0], case, range(first, last))
        return
    for name in names:
        if name not in VARIANTS:
            raise click.BadParameter(f"unknown variant {name!r}; one of {', '.join(VARIANTS)}")
        start = time.monotonic()
        tasks = [(name, c, s, max(BUDGETS)) for c in range(len(_CASES)) for s in range(first, last)]
        with mp.get_context("fork").Pool(jobs) as pool:
            results = pool.map(replay, tasks, chunksize=1)
        per: dict[int, list] = {}
        for c, _, trajectory in results:
            per.setdefault(c, []).append(trajectory)
        means = {b: np.mean([np.mean([t[b - 1] for t in per[c]]) for c in per]) for b in BUDGETS}
        figures = " ".join(f"{means[b]:.3f}" for b in BUDGETS)
        click.echo(f"{name}: {figures} at {BUDGETS} ({time.monotonic() - start:.0f} s)")
        if save:
            Path(save).write_text(json.dumps({str(c): per[c] for c in per}))


if __name__ == "__main__":
    main()
