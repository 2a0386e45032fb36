"""Best-first local search: a short random start, then the unvisited neighbours of the best configs
found (one parameter one step), ordered by an additive model of log time fitted as it goes."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

import numpy as np

from autotune.model.space import BoundSpace, Config

# The constants were chosen on replays of recorded spaces (`autotune bench search`); the results
# moved by less than 0.01 of the optimum over N_INIT 5-12, PATIENCE 6-25, MAX_RADIUS 2-3.
# Random configs before the local search starts: enough for a first model and a good basin,
# few enough to leave most of a 50-evaluation budget.
N_INIT = 6
# A neighbourhood is at most this many steps (summed over the parameters) from its centre; a
# centre whose neighbourhood is used up gives way to the next best configuration.
MAX_RADIUS = 2
# After this many results without a new best, one random config (a cheap restart).
PATIENCE = 20
# ... and the neighbourhood walk restarts there: only configs visited since the restart are
# centres until it finds a new best of its own. Without it, the walk around a wide plateau of
# near-equal configs (pnpoly's 31 block sizes in Kernel Tuner's published spaces) used up 500
# evaluations at 0.87 of the optimum, where random sampling reached 0.98.
RESTART = True
# Every GLOBAL_EVERY-th ask leaves the neighbourhoods for the config the model likes best among
# GLOBAL_POOL random unvisited ones: main effects (a vector width, a tile size that is good
# everywhere) carry across the space, and this finds basins that no neighbour walk reaches.
GLOBAL_EVERY = 3
GLOBAL_POOL = 256
# The model: ridge regression of log time on one-hot parameter values, once MIN_FIT configs
# have run; a failed config counts as FAILURE_PENALTY (in log time) slower than the slowest.
MODEL = True
MIN_FIT = 5
RIDGE = 1.0
FAILURE_PENALTY = 1.0


class Coordinates:
    """Each valid config as a row of integers: a numeric parameter's position in its sorted value
    list, a boolean or string parameter's position in its list (a category: any change is one
    step). Distances between configs are L1 over these rows."""

    def __init__(self, space: BoundSpace) -> None:
        self.configs = space.configs
        self.index = {c: i for i, c in enumerate(self.configs)}
        params = space.space.parameters
        self.names = [p.name for p in params]
        self.categorical = np.array(
            [not all(_numeric(v) for v in p.values) for p in params], dtype=bool
        )
        self.positions = [
            {v: i for i, v in enumerate(p.values if cat else sorted(p.values))}
            for p, cat in zip(params, self.categorical, strict=True)
        ]
        self.rows = np.array(
            [
                [pos[c[n]] for n, pos in zip(self.names, self.positions, strict=True)]
                for c in self.configs
            ],
            dtype=np.int32,
        ).reshape(len(self.configs), len(self.names))

    def row_of(self, config: Config) -> np.ndarray | None:
        """Coordinates of any config of this parameter set (valid or not), None if it has other
        parameters or values outside the lists."""
        values = config.as_dict()
        if set(values) != set(self.names):
            return None
        try:
            return np.array(
                [pos[values[n]] for n, pos in zip(self.names, self.positions, strict=True)],
                dtype=np.int32,
            )
        except KeyError:
            return None

    def onehot(self, indices: np.ndarray) -> np.ndarray:
        """One column per (parameter, value) for the configs at `indices`."""
        offsets = np.cumsum([0] + [len(p) for p in self.positions[:-1]])
        out = np.zeros((len(indices), sum(len(p) for p in self.positions)))
        cols = self.rows[indices] + offsets
        out[np.arange(len(indices))[:, None], cols] = 1.0
        return out

    def distances(self, row: np.ndarray) -> np.ndarray:
        diff = np.abs(self.rows - row)
        diff[:, self.categorical] = np.minimum(diff[:, self.categorical], 1)
        return diff.sum(axis=1)

    def nearest(self, config: Config, allowed: np.ndarray | None = None) -> Config | None:
        """The valid config closest to `config` (itself if valid); ties go to the first."""
        if config in self.index and (allowed is None or allowed[self.index[config]]):
            return config
        row = self.row_of(config)
        if row is None or not len(self.configs):
            return None
        d = self.distances(row).astype(float)
        if allowed is not None:
            d[~allowed] = math.inf
        i = int(np.argmin(d))
        return None if math.isinf(d[i]) else self.configs[i]


def _numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class LocalSearch:
    """Best-first local search over the valid configs, guided by an additive model.

    The first N_INIT asks are random (or the configs given to start_from, which replace them).
    After that each ask takes the fastest config found so far whose neighbourhood still holds
    unvisited configs and returns the nearest of those (one parameter one step first, then two
    steps, which also crosses constraints that couple two parameters); among equally near ones,
    the one the model expects fastest. A config that improves on the best moves the search there
    at the next ask. Every GLOBAL_EVERY-th ask is the model's pick from a random pool instead,
    and after PATIENCE results without improvement one config is random, so a search stuck in
    a poor basin gets out. Failed configs (time None) are never centres.
    """

    name = "local"

    def __init__(
        self, space: BoundSpace, seed: int | None = None, coords: Coordinates | None = None
    ) -> None:
        self._coords = coords if coords is not None else Coordinates(space)
        self._rng = random.Random(seed)
        n = len(self._coords.configs)
        self._visited = np.zeros(n, dtype=bool)  # asked or told
        self._time = np.full(n, math.inf)  # known times; inf for failed or unknown
        self._failed = np.zeros(n, dtype=bool)
        self._results = 0  # tells of valid configs
        self._asked = 0
        self._best = math.inf
        self._stale = 0  # results since the last improvement
        self._full: dict[int, int] = {}  # centre -> the radius its neighbourhood is used up to
        self._epoch = np.ones(n, dtype=bool)  # may be centres: everything until a restart
        self._epoch_best = math.inf
        self._start: list[Config] = []
        self._random_left = N_INIT
        self._turn = 0

    def start_from(self, configs: Iterable[Config]) -> None:
        """Ask these (made valid: the nearest valid config each) before anything else, in order,
        in place of the random start."""
        for config in configs:
            near = self._coords.nearest(config, ~self._visited)
            if near is not None and near not in self._start:
                self._start.append(near)
        self._random_left = 0

    def ask(self) -> Config | None:
        if self._asked == 0:
            # Told history (a resumed study) stands in for part of the random start.
            self._random_left = max(0, self._random_left - self._results)
        while self._start:
            i = self._coords.index[self._start.pop(0)]
            if not self._visited[i]:
                return self._take(i)
        if self._visited.all():
            return None
        if self._random_left > 0 or not np.isfinite(self._time).any():
            self._random_left = max(0, self._random_left - 1)
            return self._take(self._random())
        if self._stale >= PATIENCE:
            self._stale = 0
            if RESTART:
                self._epoch[:] = False
                self._epoch_best = math.inf
            i = self._random()
            self._epoch[i] = True
            return self._take(i)
        self._turn += 1
        if GLOBAL_EVERY and self._turn % GLOBAL_EVERY == 0:
            free = np.flatnonzero(~self._visited)
            if len(free) > GLOBAL_POOL:
                free = np.array(sorted(self._rng.sample(list(free), GLOBAL_POOL)))
            return self._take(self._pick(free))
        i = self._neighbour()
        return self._take(self._random() if i is None else i)

    def tell(self, config: Config, time_ms: float | None) -> None:
        i = self._coords.index.get(config)
        if i is None:
            return  # history from another version of the space
        self._visited[i] = True
        self._results += 1
        ok = time_ms is not None and 0 < time_ms < math.inf
        self._time[i] = time_ms if ok else math.inf
        self._failed[i] = not ok
        self._best = min(self._best, time_ms) if ok else self._best
        if ok and self._epoch[i] and time_ms < self._epoch_best:
            self._epoch_best = time_ms
            self._stale = 0
        else:
            self._stale += 1

    def _take(self, i: int) -> Config:
        self._visited[i] = True
        self._epoch[i] = True
        self._asked += 1
        return self._coords.configs[i]

    def _random(self) -> int:
        free = np.flatnonzero(~self._visited)
        return int(free[self._rng.randrange(len(free))])

    def _neighbour(self) -> int | None:
        """The nearest unvisited config within MAX_RADIUS of the best centre that has one."""
        order = np.argsort(np.where(self._epoch, self._time, math.inf), kind="stable")
        for radius in range(1, MAX_RADIUS + 1):
            for centre in order:
                if not math.isfinite(self._time[centre]):
                    break
                if self._full.get(int(centre), 0) >= radius:
                    continue
                d = self._coords.distances(self._coords.rows[centre])
                d = np.where(self._visited, MAX_RADIUS + 1, d)
                nearest = int(d.min())
                if nearest > radius:
                    self._full[int(centre)] = radius
                    continue
                return self._pick(np.flatnonzero(d == nearest))
        return None

    def _pick(self, candidates: np.ndarray) -> int:
        """The candidate the additive model expects fastest; at random while it has too little
        data to say."""
        predicted = self._predict(candidates) if MODEL else None
        if predicted is None:
            return int(candidates[self._rng.randrange(len(candidates))])
        best = np.flatnonzero(predicted <= predicted.min() + 1e-12)
        return int(candidates[best[self._rng.randrange(len(best))]])

    def _predict(self, candidates: np.ndarray) -> np.ndarray | None:
        """Expected log time of candidates under a ridge fit of log time on one-hot parameter
        values over every result so far (a failure counts as the slowest result plus one)."""
        seen = np.flatnonzero(self._visited & (np.isfinite(self._time) | self._failed))
        ok = np.isfinite(self._time[seen])
        if ok.sum() < MIN_FIT:
            return None
        y = np.where(ok, np.log(np.where(ok, self._time[seen], 1.0)), 0.0)
        y[~ok] = y[ok].max() + FAILURE_PENALTY
        x = self._coords.onehot(seen)
        mean = y.mean()
        w = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ (y - mean))
        return self._coords.onehot(candidates) @ w
